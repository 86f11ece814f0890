"""Fluent builders for core values used across tests."""

from __future__ import annotations

from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import ANY_GPU, ContainerRequest, Gpu, GpuSelector, Node, PodRequest


def make_node(
    name: str = "n1",
    *,
    gpus: int = 4,
    model: str = "A100",
    memory_mib: int = 16384,
    cpu: int = 64_000,
    mem: int = 256_000,
    unhealthy: tuple[int, ...] = (),
    nvlink: tuple[tuple[int, int], ...] = (),
    numa: tuple[int, ...] | None = None,
) -> Node:
    """A node with identical GPUs, optional unhealthy indices, NVLink pairs and NUMA layout."""
    uuids = [GpuUUID(f"GPU-{name}-{i}") for i in range(gpus)]
    peers: dict[int, set[GpuUUID]] = {i: set() for i in range(gpus)}
    for a, b in nvlink:
        peers[a].add(uuids[b])
        peers[b].add(uuids[a])
    return Node(
        NodeName(name),
        cpu,
        mem,
        tuple(
            Gpu(
                uuids[i],
                i,
                model,
                memory_mib,
                healthy=i not in unhealthy,
                numa=None if numa is None else numa[i],
                nvlink_peers=frozenset(peers[i]),
            )
            for i in range(gpus)
        ),
    )


def make_pod(
    name: str = "p",
    *cores: int,
    memory_mib: int | None = None,
    cpu: int = 1000,
    mem: int = 1000,
    selector: GpuSelector = ANY_GPU,
    namespace: str = "default",
) -> PodRequest:
    """A pod with one container per value in `cores` (no values: a CPU-only pod)."""
    containers = tuple(ContainerRequest(f"c{i}", c, memory_mib) for i, c in enumerate(cores))
    return PodRequest(PodKey(f"{namespace}/{name}"), cpu, mem, containers, selector)
