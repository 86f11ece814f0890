"""Small builders for hand-off tests: pod dicts with vGPU asks and signed assignments."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.pods import container as pod_container
from tests.pods import pod_obj
from vgpu.api.assignment import binding_annotations
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare
from vgpu.node.handoff.admissions import Handoff
from vgpu.node.handoff.allocate import HandoffPolicy
from vgpu.node.model import GpuInfo
from vgpu.node.podspec import pod_info

KEY = b"handoff-test-key"
NODE = "n"
UNIT_MIB = 1024
GPU_MIB = 16384
GPUS = [GpuInfo(f"G{i}", i, "Tesla T4", GPU_MIB) for i in range(4)]

# (container, cores, memory blocks, GPU uuid)
Ctr = tuple[str, int, int, str]


def container(name: str, cores: int, blocks: int, **extra: Any) -> dict[str, Any]:
    return pod_container(name, cores=cores, memory=blocks or None, image="x", **extra)


def share(cores: int, blocks: int, gpu: str) -> GpuShare:
    mib = blocks * UNIT_MIB if blocks else GPU_MIB * cores // 100
    return GpuShare(GpuUUID(gpu), cores, mib * 1000)


def pod(
    name: str,
    apps: list[Ctr],
    inits: list[Ctr] = (),  # type: ignore[assignment]
    *,
    annotations: dict[str, str] | None = None,
    sidecars: frozenset[str] = frozenset(),
    sign: bool = True,
) -> dict[str, Any]:
    """A pod bound to NODE whose assignment gives each container its share on its GPU."""
    uid = f"uid-{name}"

    def spec(c: Ctr) -> dict[str, Any]:
        extra = {"restartPolicy": "Always"} if c[0] in sidecars else {}
        return container(c[0], c[1], c[2], **extra)

    assignment = Assignment(
        PodKey(f"ns/{name}"),
        NodeName(NODE),
        containers=tuple(
            ContainerAssignment(c[0], (share(c[1], c[2], c[3]),)) for c in [*inits, *apps]
        ),
        uid=uid,
    )
    notes = dict(annotations or {})
    if sign:
        notes |= binding_annotations(assignment, KEY)
    return pod_obj(
        name,
        [spec(c) for c in apps],
        namespace="ns",
        uid=uid,
        annotations=notes,
        init=[spec(c) for c in inits],
        node=NODE,
        phase="Pending",
        kind=False,
    )


def ids(gpu: str, kind: str, n: int, start: int = 0) -> list[str]:
    return [f"{gpu}::{kind}{k}" for k in range(start, start + n)]


def agent(
    *pods: dict[str, Any], unseen: Sequence[dict[str, Any]] = ()
) -> tuple[Handoff, HandoffPolicy, list[str]]:
    """A hand-off ledger with these pods observed and the policy answering from it; `unseen`
    pods are bound but not yet shown by the watch: the policy's re-list (`refresh`) finds
    them, as they are then (a test may change their phase)."""
    handoff = Handoff(NODE, KEY, clock=lambda: 0.0, grace_s=5.0)
    for raw in pods:
        handoff.observe(pod_info(raw))

    def relist() -> None:
        for raw in unseen:
            handoff.observe(pod_info(raw))

    admitted: list[str] = []
    policy = HandoffPolicy(
        handoff,
        GPUS,
        memory_unit_mib=UNIT_MIB,
        on_admit=lambda p: admitted.append(p),
        refresh=relist,
    )
    return handoff, policy, admitted
