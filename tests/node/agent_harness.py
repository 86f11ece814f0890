"""A node in a box: fake API server (real HTTP), stand-in kubelet and pod-resources (real unix
sockets) and a `NodeAgent` started in-process, plus helpers that play extender and kubelet."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from tests.kubeapi.server import FakeApiServer
from tests.kubelet_standin.kubelet import FakeKubelet
from tests.kubelet_standin.podresources import FakePodResources
from tests.waiting import holds_within
from vgpu.adapters._proto.podresources.v1 import api_pb2 as pr
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.adapters.kube.calls import KubeApi
from vgpu.adapters.procfs import CgroupReader, ProcessKiller
from vgpu.agent.agent import NodeAgent
from vgpu.agent.config import AgentConfig
from vgpu.api.assignment import ADMITTED, binding_annotations
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare
from vgpu.node.grants import GrantSettings

NODE = "node-a"
KEY = b"test-key"
CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"
UNIT_MIB = 1024  # T4: 15 memory blocks per GPU
T4_MIB = 15360

# (name, cores, memory blocks) per container
Spec = tuple[str, int, int]


@dataclass
class Box:
    dir: Path
    api: FakeApiServer
    kube: KubeApi
    kubelet: FakeKubelet
    podres: FakePodResources
    gpus: list[str]
    agents: list[NodeAgent] = field(default_factory=list)
    clients: list[Any] = field(default_factory=list)

    @property
    def agent(self) -> NodeAgent:
        return self.agents[-1]

    # ----- agent lifecycle -----------------------------------------------------------------------
    def start_agent(
        self,
        *,
        backend: FakeGpuBackend | None = None,
        cgroups: CgroupReader | None = None,
        killer: ProcessKiller | None = None,
        **overrides: Any,
    ) -> NodeAgent:
        settings: dict[str, Any] = {
            "node_name": NODE,
            "assignment_key": KEY,
            "plugin_dir": self.dir,
            "pod_resources_socket": self.dir / "podres.sock",
            "memory_unit_mib": UNIT_MIB,
            "reconcile_s": 0.2,
            "watch_timeout_s": 1,
            "retry_s": 0.1,
            "stop_grace_s": 0.2,
            "grants": GrantSettings(),
            "cdi_spec_dirs": (self.dir / "cdi",),  # never the host's
            "toolkit_config": self.dir / "nvidia-container-runtime.toml",
        }
        settings.update(overrides)
        backend = backend or FakeGpuBackend.from_spec("2xT4", seed=NODE)
        client = self.api.api_client()
        self.clients.append(client)
        agent = NodeAgent(
            AgentConfig(**settings),
            backend,
            KubeApi(client, request_timeout=5),
            cgroups=cgroups,
            killer=killer,
        )
        self.agents.append(agent)
        agent.start()
        assert agent.wait_ready(10), "agent did not become ready"
        regs = len(self.kubelet.registrations)
        assert self.kubelet.wait_for(lambda: len(self.kubelet.devices(CORES)) == 200)
        assert regs >= 2
        return agent

    def stop_agent(self) -> None:
        self.agent.stop()

    def node_requests(self, method: str) -> int:
        """The `method` requests for this node's object so far (each sync of the agent's node
        metadata GETs it, then PATCHes only what differs): a count to wait on for syncs."""
        path = f"/nodes/{NODE}"
        return sum(1 for r in self.api.requests if r.method == method and r.path.endswith(path))

    # ----- playing the extender ------------------------------------------------------------------
    def create_pod(
        self, name: str, containers: Sequence[Spec], init: Sequence[Spec] = (), **meta: Any
    ) -> dict[str, Any]:
        def spec(c: Spec) -> dict[str, Any]:
            limits = {CORES: str(c[1])}
            if c[2]:
                limits[MEMORY] = str(c[2])
            return {"name": c[0], "image": "x", "resources": {"limits": limits}}

        pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", **meta},
            "spec": {
                "containers": [spec(c) for c in containers],
                "initContainers": [spec(c) for c in init],
            },
            "status": {"phase": "Pending"},
        }
        return self.api.store.put(pod)

    def assignment(self, pod: dict[str, Any], gpus: dict[str, list[tuple[int, int]]]) -> Assignment:
        """gpus: container -> [(GPU index, cores)]; memory as asked, else proportional."""
        asks = {
            c["name"]: int(c["resources"]["limits"].get(MEMORY, 0))
            for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]
        }
        containers = []
        for name, shares in gpus.items():
            containers.append(
                ContainerAssignment(
                    name,
                    tuple(
                        GpuShare(
                            GpuUUID(self.gpus[i]),
                            cores,
                            asks[name] * UNIT_MIB * 1000 or T4_MIB * 1000 * cores // 100,
                        )
                        for i, cores in shares
                    ),
                )
            )
        meta = pod["metadata"]
        return Assignment(
            pod=PodKey(f"default/{meta['name']}"),
            node=NodeName(NODE),
            containers=tuple(containers),
            uid=meta["uid"],
        )

    def bind(
        self, pod: dict[str, Any], annotations: dict[str, str], *, wait_seen: bool = True
    ) -> None:
        meta = pod["metadata"]
        # A client of its own per bind: KubeApi.bind_pod releases its connection without reading
        # the reply, so a reused connection would read that stale body.
        client = self.api.api_client()
        try:
            KubeApi(client).bind_pod(
                "default", meta["name"], NODE, annotations=annotations, uid=meta["uid"]
            )
        finally:
            client.close()
        key = PodKey(f"default/{meta['name']}")
        if wait_seen:
            assert holds_within(lambda: key in self.agent.handoff.pods()), f"agent never saw {key}"

    def place(
        self,
        name: str,
        containers: Sequence[Spec],
        gpus: dict[str, list[tuple[int, int]]],
        **kw: Any,
    ) -> dict[str, Any]:
        pod = self.create_pod(name, containers, **kw)
        self.bind(pod, binding_annotations(self.assignment(pod, gpus), KEY))
        return pod

    def pod(self, name: str) -> dict[str, Any]:
        obj = self.api.store.get("Pod", "default", name)
        assert obj is not None
        return obj

    def admitted(self, name: str) -> list[str] | None:
        value = (self.pod(name)["metadata"].get("annotations") or {}).get(ADMITTED)
        return None if value is None else list(json.loads(value))

    def set_phase(self, name: str, phase: str) -> None:
        pod = self.pod(name)
        pod["status"] = {"phase": phase}
        self.api.store.put(pod)

    # ----- playing the kubelet -------------------------------------------------------------------
    def admit(
        self, pod: str, container: str, resource: str, size: int, *, use_preferred: bool = True
    ) -> tuple[list[str], dict[str, str]]:
        """Allocate like the kubelet; on success record the IDs in pod-resources."""
        ids, response = self.kubelet.allocate(resource, size, use_preferred=use_preferred)
        self.hold(pod, container, resource, ids)
        return ids, dict(response.container_responses[0].envs)

    def hold(self, pod: str, container: str, resource: str, ids: list[str]) -> None:
        entry = next((p for p in self.podres.pods if p.name == pod), None)
        if entry is None:
            entry = pr.PodResources(name=pod, namespace="default")
            self.podres.pods.append(entry)
        target = next((c for c in entry.containers if c.name == container), None)
        if target is None:
            target = entry.containers.add(name=container)
        for device in ids:  # one entry per ID, as the kubelet lists them (kubelet/pod_resources.py)
            target.devices.add(resource_name=resource, device_ids=[device])

    def refused(self, resource: str, size: int, *, use_preferred: bool = True) -> str:
        """Allocate expecting a refusal; returns its message."""
        try:
            self.kubelet.allocate(resource, size, use_preferred=use_preferred)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
            return str(e.details())
        raise AssertionError("Allocate was granted, expected a refusal")

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.store.objects("Event") if e.get("reason") == reason]


def gpu_of(ids: Sequence[str]) -> set[str]:
    return {i.split("::")[0] for i in ids}


def make_box() -> Iterator[Box]:
    path = Path(tempfile.mkdtemp(prefix="vg"))
    api = FakeApiServer().start()
    api.store.put({"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE}})
    client = api.api_client()
    kubelet = FakeKubelet(path)
    kubelet.start()
    podres = FakePodResources(path / "podres.sock")
    podres.start()
    gpus = [g.uuid for g in FakeGpuBackend.from_spec("2xT4", seed=NODE).inventory().gpus]
    box = Box(path, api, KubeApi(client, request_timeout=5), kubelet, podres, sorted(gpus))
    try:
        yield box
    finally:
        for agent in box.agents:
            agent.stop()
        for extra in box.clients:
            extra.close()
        podres.stop()
        kubelet.stop()
        client.close()
        api.stop()
        shutil.rmtree(path, ignore_errors=True)
