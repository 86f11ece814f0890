"""A test cluster of the real Kubernetes components on loopback, with vgpu's daemons.

etcd, kube-apiserver, the vgpu-scheduler (real kube-scheduler, shipped configuration), and per
node a real kubelet on Kubernetes' fake CRI runtime with `vgpu node-agent --fake-gpus` as its
device plugin; plus the vgpu extender. All Kubernetes parts come from one Go binary
(hack/testcluster, `testcluster <component>`). Each kubelet runs in its own mount namespace with the cluster's
node directory bound over /var/lib/kubelet, because the kubelet's device-plugin socket path is a
constant (k8s.io/kubelet pkg/apis/deviceplugin/v1beta1/constants.go): so several kubelets run on
one machine, and the agent reaches that node's device-plugin directory at its real path under the
cluster directory.

vgpu's daemons authenticate with tokens of the service accounts in daemonset/rbac (TokenRequest);
kube-scheduler as the vgpu-scheduler service account; kubelets as system:node:NAME.
"""

from __future__ import annotations

import functools
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.realk8s import configs, manifests
from tests.realk8s.processes import Processes, free_port, wait_until
from tests.realk8s.rest import ApiError, Identity, Obj, Rest

REPO = Path(__file__).resolve().parents[2]
DAEMONSET = REPO / "daemonset"
SYSTEM = "vgpu-system"
PODGROUPS = "namespaces/default/podgroups"
ACCOUNTS = ("vgpu-extender", "vgpu-node-agent", "vgpu-scheduler", "vgpu-inspect-user")


@dataclass(frozen=True)
class NodeSpec:
    name: str
    gpus: str = "4xA100-SXM4-80GB"
    topology_policy: str = "none"


class RealCluster:
    """`up()` starts everything and waits until each node's vGPUs are schedulable."""

    def __init__(
        self, root: Path, binary: Path, nodes: list[NodeSpec], *, admission_policy: bool = True
    ) -> None:
        self.root, self.binary, self.nodes = root, binary, {n.name: n for n in nodes}
        self.admission_policy = admission_policy
        self.pki = root / "pki"
        self.procs = Processes(root)
        self.ports = {
            k: free_port() for k in ("etcd", "peer", "apiserver", "scheduler", "extender")
        }
        self.server = f"https://127.0.0.1:{self.ports['apiserver']}"
        self.key_file = root / "assignment-key"
        self.tokens: dict[str, str] = {}
        self._admin: Rest | None = None

    # -- identities ------------------------------------------------------------------------------
    @property
    def admin(self) -> Rest:
        if self._admin is None:
            who = Identity("admin", str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
            self._admin = Rest(self.server, str(self.pki / "ca.crt"), who)
        return self._admin

    def as_account(self, account: str) -> Rest:
        return Rest(
            self.server, str(self.pki / "ca.crt"), Identity(account, token=self.tokens[account])
        )

    def kubeconfig(self, who: str) -> Path:
        return self.root / "kubeconfigs" / f"{who}.yaml"

    # -- lifecycle -------------------------------------------------------------------------------
    def up(self, *, api_only: bool = False) -> RealCluster:
        """Start the cluster; with `api_only`, etcd and the API server (set up) alone."""
        started = time.monotonic()
        self._run(
            [str(self.binary), "certs", f"--dir={self.pki}", f"--nodes={','.join(self.nodes)}"]
        )
        self.key_file.write_text(secrets.token_hex(32))
        self.start_etcd()
        self.start_apiserver()
        self._bootstrap()
        if api_only:
            return self
        self.start_scheduler()
        for name in self.nodes:
            self.start_node(name)
        self.start_extender("extender-0")
        for name in self.nodes:
            self.wait_node_gpus(name)
        (self.root / "cluster.json").write_text(json.dumps(self.describe(), indent=2))
        print(f"test cluster up in {time.monotonic() - started:.1f}s", file=sys.stderr)
        return self

    def down(self) -> None:
        self.procs.stop_all()
        if self._admin is not None:
            self._admin.close()

    def describe(self) -> Obj:
        return {
            "server": self.server,
            "ca": str(self.pki / "ca.crt"),
            "kubeconfigs": {
                p.stem: str(p) for p in sorted((self.root / "kubeconfigs").glob("*.yaml"))
            },
            "extender": f"https://127.0.0.1:{self.ports['extender']}",
            "nodes": list(self.nodes),
            "logs": str(self.procs.logs),
        }

    def _watching(self, component: str) -> tuple[Path, Callable[[], bool]]:
        """A component's log and liveness, for `wait_until`."""
        return self.procs.log(component), functools.partial(self.procs.alive, component)

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[1]} failed: {done.stderr.strip()}")

    # -- control plane ---------------------------------------------------------------------------
    def start_etcd(self) -> None:
        url = f"http://127.0.0.1:{self.ports['etcd']}"
        self.procs.start(
            "etcd",
            [
                str(self.binary),
                "etcd",
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-url={url}",
                f"--listen-peer-url=http://127.0.0.1:{self.ports['peer']}",
            ],
        )
        wait_until(
            lambda: "etcd ready" in self.procs.log("etcd").read_text(),
            60,
            "etcd",
            self._watching("etcd"),
        )

    def start_apiserver(self) -> None:
        etcd = f"http://127.0.0.1:{self.ports['etcd']}"
        args = configs.apiserver_args(self.pki, etcd, self.ports["apiserver"])
        self.procs.start("kube-apiserver", [str(self.binary), "kube-apiserver", *args])
        wait_until(
            lambda: self.admin.request("GET", "/readyz") is not None,
            180,
            "kube-apiserver /readyz",
            self._watching("kube-apiserver"),
        )

    def _bootstrap(self) -> None:
        """vgpu's namespace, RBAC and admission policy as shipped; tokens for its accounts."""
        shipped = [
            "namespace.yaml",
            "rbac/extender.yaml",
            "rbac/node-agent.yaml",
            "rbac/scheduler.yaml",
            "rbac/inspect.yaml",
        ]
        if self.admission_policy:  # benchmarks fill nodes with bound pods as admin: no policy
            shipped.append("admission-policy.yaml")
        for name in shipped:
            manifests.apply_file(self.admin, DAEMONSET / name)
        # A user of `kubectl inspect vgpu`: the shipped role, granted as its comment says.
        manifests.create(
            self.admin,
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "vgpu-inspect-user", "namespace": SYSTEM},
            },
        )
        manifests.create(self.admin, _binding("vgpu-inspect-user", "vgpu-inspect"))
        # scheduler-plugins' PodGroup, as a gang's PodGroup is read by the extender.
        manifests.create(self.admin, POD_GROUP_CRD)
        wait_until(
            lambda: self.admin.get(f"/apis/scheduling.x-k8s.io/v1alpha1/{PODGROUPS}"),
            60,
            "the PodGroup CRD to be served",
        )
        # No kube-controller-manager runs: the default service account it would create.
        manifests.create(
            self.admin,
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": "default"},
                "automountServiceAccountToken": False,
            },
        )
        (self.root / "kubeconfigs").mkdir(exist_ok=True)
        for account in ACCOUNTS:
            self.tokens[account] = manifests.service_account_token(self.admin, SYSTEM, account)
            configs.write_kubeconfig(
                self.kubeconfig(account),
                self.server,
                self.pki / "ca.crt",
                Identity(account, token=self.tokens[account]),
            )
        configs.write_kubeconfig(
            self.kubeconfig("admin"),
            self.server,
            self.pki / "ca.crt",
            Identity("admin", str(self.pki / "admin.crt"), str(self.pki / "admin.key")),
        )

    def start_scheduler(
        self, shipped: str = "kube-scheduler-config.yaml", edit: Callable[[Obj], None] | None = None
    ) -> None:
        """The vgpu-scheduler with a shipped configuration; `edit` changes it (benchmarks only)."""
        config = configs.scheduler_config(
            DAEMONSET / "scheduler" / shipped,
            self.kubeconfig("vgpu-scheduler"),
            f"127.0.0.1:{self.ports['extender']}/scheduler",
            self.pki,
        )
        if edit is not None:
            edit(config)
        before = self._lease_holder(SYSTEM, "vgpu-scheduler")
        path = self.root / "scheduler-config.yaml"
        path.write_text(yaml.safe_dump(config))
        kc = self.kubeconfig("vgpu-scheduler")
        self.procs.start(
            "kube-scheduler",
            [
                str(self.binary),
                "kube-scheduler",
                f"--config={path}",
                f"--secure-port={self.ports['scheduler']}",
                "--bind-address=127.0.0.1",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--v=2",  # one line per scheduling attempt and binding
            ],
        )
        wait_until(
            lambda: self._lease_holder(SYSTEM, "vgpu-scheduler") not in (None, before),
            90,
            "kube-scheduler to lead",
            self._watching("kube-scheduler"),
        )

    def _lease_holder(self, namespace: str, name: str) -> str | None:
        try:
            lease = self.admin.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
            )
        except ApiError:
            return None
        holder = lease.get("spec", {}).get("holderIdentity")
        return str(holder) if holder else None

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
        config = configs.kubelet_config(
            node, self.pki, name, free_port(), free_port(), spec.topology_policy
        )
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
        # Own mount namespace: the node directory becomes this kubelet's /var/lib/kubelet.
        # (/var/log/containers, the kubelet's log-link directory, is a constant too.)
        binds = {
            node / "kubelet": "/var/lib/kubelet",
            node / "container-logs": "/var/log/containers",
        }
        script = " && ".join(f'mount --bind "{src}" {dst}' for src, dst in binds.items())
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
        """Do the node lifecycle controller's part (no kube-controller-manager runs): the kubelet
        registers with the not-ready taint, removed once the node is Ready."""
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
                f"--kubeconfig={self.kubeconfig('vgpu-node-agent')}",
                f"--assignment-key-file={self.key_file}",
                "--metrics-port=0",
            ],
        )

    def gpu_count(self, name: str) -> int:
        return int(self.nodes[name].gpus.split("x", 1)[0])

    def wait_node_gpus(self, name: str, timeout: float = 90) -> float:
        """Wait until the node's allocatable vGPU cores are back; seconds waited."""
        want = str(100 * self.gpu_count(name))
        started = time.monotonic()

        def ready() -> bool:
            status = self.admin.get(f"/api/v1/nodes/{name}").get("status", {})
            return bool(status.get("allocatable", {}).get("vgpu.io/cores") == want)

        wait_until(
            ready,
            timeout,
            f"{name} to advertise {want} vgpu.io/cores",
            self._watching(f"agent-{name}"),
        )
        return time.monotonic() - started

    def start_extender(self, identity: str, port: int | None = None) -> None:
        port = port or self.ports["extender"]
        self.procs.start(
            identity,
            [
                sys.executable,
                "-m",
                "vgpu",
                "extender",
                "--host=127.0.0.1",
                f"--port={port}",
                f"--kubeconfig={self.kubeconfig('vgpu-extender')}",
                f"--tls-cert={self.pki / 'extender.crt'}",
                f"--tls-key={self.pki / 'extender.key'}",
                f"--client-ca={self.pki / 'ca.crt'}",
                f"--assignment-key-file={self.key_file}",
                f"--lease-namespace={SYSTEM}",
                "--lease-name=vgpu-extender",
                f"--identity={identity}",
            ],
        )
        wait_until(
            lambda: self._lease_holder(SYSTEM, "vgpu-extender"),
            60,
            "an extender to lead",
            self._watching(identity),
        )

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


# A minimal stand-in for scheduler-plugins' PodGroup CRD: the group, version, kind and the
# fields vgpu reads (spec.minMember); the rest of the schema is left open.
POD_GROUP_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {
        "group": "scheduling.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "plural": "podgroups",
            "singular": "podgroup",
            "kind": "PodGroup",
            "shortNames": ["pg"],
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {"minMember": {"type": "integer"}},
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


def _binding(account: str, role: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{role}-{account}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": SYSTEM}],
    }
