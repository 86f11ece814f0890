"""The test cluster's nodes: per node a fake CRI runtime, a real kubelet in its own mount
namespace and a `vgpu node-agent --fake-gpus` registered with it as its device plugin.

Each kubelet runs with the node's directory bound over /var/lib/kubelet (and /var/log/containers),
because the kubelet's device-plugin socket path is a constant
(k8s.io/kubelet pkg/apis/deviceplugin/v1beta1/constants.go): so several kubelets share one
machine, and the agent reaches its node's device-plugin directory at its real path.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from tests.realk8s import configs, manifests
from tests.realk8s.processes import Processes, free_port, wait_until
from tests.realk8s.rest import ApiError, Identity, Obj, Rest


@dataclass(frozen=True)
class NodeSpec:
    """A node: its fake GPUs (a `--fake-gpus` spec or a .yaml inventory file), the kubelet's
    topology manager policy and scope, extra `vgpu node-agent` flags and environment (e.g. the
    stand-in NVML's library path and config), the kubelet's
    `syncFrequency` (None: the kubelet's default, 1 min) and a drop-in directory the kubelet
    reads with `--config-dir` (daemonset/kubelet, as an operator installs it)."""

    name: str
    gpus: str = "4xA100-SXM4-80GB"
    topology_policy: str = "none"
    topology_scope: str = "container"
    agent_flags: tuple[str, ...] = ()
    agent_env: tuple[tuple[str, str], ...] = ()
    sync_frequency: str | None = "5s"
    kubelet_dropins: Path | None = None


class NodeControl:
    """Starting and reading the nodes; mixed into `RealCluster`, which provides the rest."""

    root: Path
    binary: Path
    pki: Path
    server: str
    key_file: Path
    nodes: dict[str, NodeSpec]
    procs: Processes

    @property
    def admin(self) -> Rest:
        raise NotImplementedError

    def kubeconfig(self, who: str) -> Path:
        raise NotImplementedError

    def _watching(self, component: str) -> tuple[Path, Callable[[], bool]]:
        raise NotImplementedError

    # -- nodes -----------------------------------------------------------------------------------
    def node_dir(self, name: str) -> Path:
        return self.root / "nodes" / name

    def start_node(self, name: str) -> None:
        node = self.node_dir(name)
        subdirs = (
            "kubelet/device-plugins",
            "kubelet/pod-resources",
            "containers",
            "pod-logs",
            "container-logs",
        )
        for sub in subdirs:
            (node / sub).mkdir(parents=True, exist_ok=True)
        self.procs.start(
            f"cri-{name}",
            [
                str(self.binary),
                "fake-cri",
                f"--endpoint=unix://{node / 'cri.sock'}",
                f"--record-dir={node / 'containers'}",
            ],
        )
        wait_until(lambda: (node / "cri.sock").exists(), 30, f"fake CRI of {name}")
        self.start_kubelet(name)
        self.start_agent(name)

    def start_kubelet(self, name: str) -> None:
        node, spec = self.node_dir(name), self.nodes[name]
        config = configs.kubelet_config(node, self.pki, name, free_port(), free_port())
        config["topologyManagerPolicy"] = spec.topology_policy
        config["topologyManagerScope"] = spec.topology_scope
        config.pop("syncFrequency")
        if spec.sync_frequency is not None:
            config["syncFrequency"] = spec.sync_frequency
        if spec.kubelet_dropins is not None:
            # Merged with drop-ins, the config's empty list reads as unset and is defaulted to
            # ["pods"], which needs cgroupsPerQOS; "none" says the same and survives the merge.
            config["enforceNodeAllocatable"] = ["none"]
        (node / "kubelet.yaml").write_text(yaml.safe_dump(config))
        configs.write_kubeconfig(
            node / "kubeconfig",
            self.server,
            self.pki / "ca.crt",
            Identity(
                f"system:node:{name}",
                str(self.pki / f"kubelet-{name}.crt"),
                str(self.pki / f"kubelet-{name}.key"),
            ),
        )
        kubelet = [
            str(self.binary),
            "kubelet",
            f"--config={node / 'kubelet.yaml'}",
            f"--kubeconfig={node / 'kubeconfig'}",
            f"--hostname-override={name}",
            "--node-ip=127.0.0.1",
            "--node-labels=vgpu.io/enabled=true",
        ]
        if spec.kubelet_dropins is not None:
            kubelet.append(f"--config-dir={spec.kubelet_dropins}")
        # Own mount namespace: the node directory becomes this kubelet's /var/lib/kubelet.
        # (/var/log/containers, the kubelet's log-link directory, is a constant too.)
        binds = {
            node / "kubelet": "/var/lib/kubelet",
            node / "container-logs": "/var/log/containers",
        }
        # An empty working directory of its own: with the fake CRI runtime's empty log paths
        # the kubelet's log cleanup globs "*" relative to it and removes what it matches
        # (`Clean` in pkg/kubelet/logs/container_log_manager.go), the repository's files included.
        scratch = node / "kubelet-cwd"
        scratch.mkdir(exist_ok=True)
        script = f'cd "{scratch}" && '
        script += " && ".join(f'mount --bind "{src}" {dst}' for src, dst in binds.items())
        script += ' && exec "$@"'
        for target in binds.values():
            Path(target).mkdir(parents=True, exist_ok=True)
        self.procs.start(
            f"kubelet-{name}",
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "kubelet",
                *kubelet,
            ],
        )
        wait_until(
            lambda: self._node_ready(name),
            120,
            f"node {name} Ready",
            self._watching(f"kubelet-{name}"),
        )
        self._untaint(name)

    def _untaint(self, name: str) -> None:
        """Do the node lifecycle controller's part (no kube-controller-manager runs): a new Node
        gets the not-ready taint from the API server's TaintNodesByCondition admission
        (plugin/pkg/admission/nodetaint/admission.go), lifted once the node is Ready."""
        path = f"/api/v1/nodes/{name}"
        taints = self.admin.get(path)["spec"].get("taints", [])
        kept = [t for t in taints if t["key"] != "node.kubernetes.io/not-ready"]
        if kept != taints:
            self.admin.merge_patch(path, {"spec": {"taints": kept or None}})

    def _node_ready(self, name: str) -> bool:
        try:
            node = self.admin.get(f"/api/v1/nodes/{name}")
        except ApiError:
            return False
        conditions = node.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def start_agent(self, name: str) -> None:
        node, spec = self.node_dir(name), self.nodes[name]
        self.procs.start(
            f"agent-{name}",
            [
                sys.executable,
                "-m",
                "vgpu",
                "node-agent",
                f"--fake-gpus={spec.gpus}",
                f"--device-plugin-dir={node / 'kubelet' / 'device-plugins'}",
                f"--pod-resources-socket={node / 'kubelet' / 'pod-resources' / 'kubelet.sock'}",
                f"--node-name={name}",
                f"--kubeconfig={self.agent_kubeconfig(name)}",
                f"--assignment-key-file={self.key_file}",
                "--metrics-port=0",
                *spec.agent_flags,
            ],
            env=dict(spec.agent_env),
        )

    def agent_kubeconfig(self, name: str) -> Path:
        """The node agent's identity on `name`: the shipped service account with a token bound to
        that Node, as the kubelet gives the agent's DaemonSet pod a token bound to the pod (both
        name the node, which the shipped own-node admission policy compares)."""
        node = self.admin.get(f"/api/v1/nodes/{name}")
        bound = {"kind": "Node", "apiVersion": "v1", "name": name, "uid": node["metadata"]["uid"]}
        token = manifests.service_account_token(
            self.admin, "vgpu-system", "vgpu-node-agent", bound=bound
        )
        path = self.root / "kubeconfigs" / f"vgpu-node-agent-{name}.yaml"
        configs.write_kubeconfig(
            path, self.server, self.pki / "ca.crt", Identity("vgpu-node-agent", token=token)
        )
        return path

    def restart_node(self, spec: NodeSpec) -> float:
        """Restart a node's kubelet and agent as `spec` says; seconds until the restarted
        kubelet reports the node's full vGPU capacity (so the agent registered with it)."""
        self.procs.stop(f"agent-{spec.name}")
        self.procs.stop(f"kubelet-{spec.name}")
        self.nodes[spec.name] = spec
        since = time.time()
        self.start_kubelet(spec.name)
        self.start_agent(spec.name)
        self.wait_node_gpus(spec.name, since=since)
        return time.time() - since

    def gpu_count(self, name: str) -> int:
        gpus = self.nodes[name].gpus
        if gpus.endswith(".yaml"):
            return len(yaml.safe_load(Path(gpus).read_text())["gpus"])
        return int(gpus.split("x", 1)[0])

    def wait_node_gpus(self, name: str, timeout: float = 90, since: float = 0.0) -> float:
        """Wait until the node's allocatable vGPU cores are all there, as reported by a kubelet
        whose Ready heartbeat is not older than `since` (wall clock; 0: any). A restarted
        kubelet restores its devices unhealthy from its checkpoint and counts them allocatable
        only once the plugin registered and listed them (`readCheckpoint`, `GetCapacity` in
        pkg/kubelet/cm/devicemanager/manager.go), so with `since` set to its start, stale
        status is never taken for it. Returns the seconds waited."""
        want = str(100 * self.gpu_count(name))
        floor = datetime.fromtimestamp(int(since), tz=UTC)
        started = time.monotonic()

        def reported() -> bool:
            status = self.admin.get(f"/api/v1/nodes/{name}").get("status", {})
            ready = [c for c in status.get("conditions", []) if c["type"] == "Ready"]
            beat = ready[0].get("lastHeartbeatTime", "") if ready else ""
            fresh = bool(beat) and datetime.fromisoformat(beat) >= floor
            return fresh and status.get("allocatable", {}).get("vgpu.io/cores") == want

        wait_until(
            reported,
            timeout,
            f"{name} to advertise {want} vgpu.io/cores",
            self._watching(f"agent-{name}"),
        )
        return time.monotonic() - started

    # -- what the kubelet asked of the runtime ---------------------------------------------------
    def containers(self, name: str) -> list[Obj]:
        """Every CreateContainer request the node's kubelet sent, as the fake runtime recorded."""
        records = sorted((self.node_dir(name) / "containers").glob("*.json"))
        return [json.loads(p.read_text()) for p in records]

    def container(self, pod: str, container: str, namespace: str = "default") -> Obj | None:
        for name in self.nodes:
            for record in self.containers(name):
                if (record["namespace"], record["pod"], record["container"]) == (
                    namespace,
                    pod,
                    container,
                ):
                    return record
        return None
