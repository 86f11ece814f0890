"""A whole vgpu cluster in one process tree, for the end-to-end tests.

* a fake Kubernetes API server over real HTTP (`tests.kubeapi`);
* per node: fake GPUs (`FakeGpuBackend`), a stand-in kubelet device-plugin directory and a
  pod-resources stand-in over real unix sockets (short temporary paths: a unix socket path must
  stay under 108 bytes), and a `NodeAgent` started in-process;
* one `ExtenderDaemon` serving kube-scheduler's extender protocol over real HTTP.

The agents write each node's `vgpu.io/gpu-inventory` annotation; the extender learns the GPUs
from it through its node watch, exactly as in a cluster. `Cluster.start()` returns once every
agent is registered and the extender knows every node's GPUs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tests.kubeapi.server import FakeApiServer
from tests.kubelet_standin.kubelet import FakeKubelet
from tests.kubelet_standin.podresources import FakePodResources
from tests.waiting import wait_until
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.adapters.kube.calls import KubeApi
from vgpu.agent.agent import NodeAgent
from vgpu.agent.config import AgentConfig
from vgpu.api.assignment import ADMITTED, ASSIGNMENT
from vgpu.api.resources import ResourceNames
from vgpu.daemons.extender.daemon import DaemonConfig, ExtenderDaemon
from vgpu.extender.config import ExtenderConfig

KEY = b"e2e-shared-key"
CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"
Obj = dict[str, Any]


@dataclass
class NodeBox:
    """One node: its GPUs, its kubelet stand-ins and its agent."""

    name: str
    spec: str
    dir: Path
    kubelet: FakeKubelet
    podres: FakePodResources
    agent: NodeAgent
    client: Any
    gpus: list[str]  # UUIDs by GPU index

    def stop(self) -> None:
        self.agent.stop()
        self.podres.stop()
        self.kubelet.stop()
        self.client.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """The fake API server, node boxes and the extender; `start()` then `stop()`."""

    def __init__(
        self, nodes: dict[str, str], *, bind_wait: float = 3.0, names: ResourceNames | None = None
    ) -> None:
        self.specs = nodes
        self.bind_wait = bind_wait
        self.names = names or ResourceNames()
        self.api = FakeApiServer()
        self.nodes: dict[str, NodeBox] = {}
        self.extender: ExtenderDaemon | None = None
        self._clients: list[Any] = []

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Cluster:
        self.api.start()
        for name, spec in self.specs.items():
            self.api.store.put(_node_object(name))
            self.nodes[name] = self._start_node(name, spec)
        self.extender = self._start_extender()
        for box in self.nodes.values():
            wait_until(
                partial(self._extender_knows, box),
                10.0,
                what=f"the extender to learn {box.name}'s GPUs",
            )
        return self

    def stop(self) -> None:
        if self.extender is not None:
            self.extender.stop()
        for box in self.nodes.values():
            box.stop()
        for client in self._clients:
            client.close()
        self.api.stop()

    def _client(self) -> KubeApi:
        client = self.api.api_client()
        self._clients.append(client)
        return KubeApi(client, request_timeout=5)

    def _start_node(self, name: str, spec: str) -> NodeBox:
        path = Path(tempfile.mkdtemp(prefix="vge"))
        kubelet = FakeKubelet(path)
        kubelet.start()
        podres = FakePodResources(path / "podres.sock")
        podres.start()
        backend = FakeGpuBackend.from_spec(spec, seed=name)
        gpus = [g.uuid for g in sorted(backend.inventory().gpus, key=lambda g: g.index)]
        config = AgentConfig(
            node_name=name,
            assignment_key=KEY,
            plugin_dir=path,
            pod_resources_socket=path / "podres.sock",
            reconcile_s=0.5,
            watch_timeout_s=5,
            retry_s=0.1,
            stop_grace_s=0.2,
            domain=self.names.domain,
        )
        client = self.api.api_client()
        agent = NodeAgent(config, backend, KubeApi(client, request_timeout=5))
        box = NodeBox(name, spec, path, kubelet, podres, agent, client, gpus)
        agent.start()
        assert agent.wait_ready(10), f"agent on {name} did not become ready"
        want = 100 * len(gpus)
        assert kubelet.wait_for(lambda: len(kubelet.devices(self.names.cores)) == want, timeout=10)
        return box

    def _start_extender(self) -> ExtenderDaemon:
        config = DaemonConfig(
            key=KEY,
            extender=ExtenderConfig(bind_wait=self.bind_wait, names=self.names),
            host="127.0.0.1",
            port=0,
            watch_timeout=30,
            sweep_interval=0.5,
            retry_delay=0.05,
        )
        daemon = ExtenderDaemon(self._client(), config)
        daemon.start()
        assert daemon.wait_ready(10), daemon.why_not_ready()
        return daemon

    def _extender_knows(self, box: NodeBox) -> bool:
        assert self.extender is not None
        with self.extender.cache.atomic():
            state = self.extender.cache.node_state(box.name)
            return state is not None and len(state.gpus) == len(box.gpus)

    # -- objects ---------------------------------------------------------------------------------
    def put(self, obj: Obj) -> Obj:
        return self.api.store.put(obj)

    def pod(self, name: str, namespace: str = "default") -> Obj:
        obj = self.api.store.get("Pod", namespace, name)
        assert obj is not None, f"pod {namespace}/{name} does not exist"
        return obj

    def annotation(self, pod: str, key: str) -> str | None:
        value = (self.pod(pod)["metadata"].get("annotations") or {}).get(key)
        return None if value is None else str(value)

    def admitted(self, pod: str) -> list[str] | None:
        value = self.annotation(pod, ADMITTED)
        return None if value is None else list(json.loads(value))

    def assignment_text(self, pod: str) -> str | None:
        return self.annotation(pod, ASSIGNMENT)

    def set_phase(self, pod: str, phase: str, reason: str = "") -> None:
        obj = self.pod(pod)
        obj["status"] = {"phase": phase, "reason": reason}
        self.put(obj)

    def delete(self, pod: str) -> None:
        self.api.store.remove("Pod", "default", pod)


def _node_object(name: str) -> Obj:
    """A Node as the kubelet registers it: capacity, no GPU inventory (the agent adds that)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }
