"""Which GPUs of a node can take a container now, and whether the host has the CPU and memory.

The fast predicates under both placement (`vgpu.core.placement`, which chooses GPUs) and the
verdicts (`vgpu.core.fit`, which explains why a pod does not fit). Pure.
"""

from __future__ import annotations

from vgpu.core.model import ContainerRequest, GpuSelector, PodRequest
from vgpu.core.state import NodeState
from vgpu.core.units import CORES_PER_GPU, memory_need_mmib


def usable_positions(ns: NodeState, selector: GpuSelector) -> tuple[int, ...]:
    """Positions of healthy GPUs the selector accepts (memoised until the node changes)."""
    key = ("usable", selector)
    hit = ns.cache.get(key)
    if hit is None:
        hit = tuple(
            i
            for i, g in enumerate(ns.gpus)
            if g.healthy and (selector.is_any or selector.allows(g))
        )
        ns.cache[key] = hit
    return hit  # type: ignore[return-value]


def fractional_fits(ns: NodeState, pos: int, container: ContainerRequest) -> bool:
    """Whether a fractional container fits the free cores and memory of one GPU."""
    if ns.free_cores[pos] < container.cores:
        return False
    need = memory_need_mmib(container.cores, container.memory_mib, ns.gpus[pos].memory_mib)
    return ns.free_mem[pos] >= need


def idle_positions(ns: NodeState, positions: tuple[int, ...]) -> list[int]:
    """Positions among `positions` whose GPU is entirely free."""
    return [p for p in positions if ns.free_cores[p] == CORES_PER_GPU and ns.is_idle_gpu(p)]


def candidates(ns: NodeState, container: ContainerRequest, selector: GpuSelector) -> list[int]:
    """GPU positions that could take this container now (idle ones for whole-GPU asks)."""
    positions = usable_positions(ns, selector)
    if container.whole:
        return idle_positions(ns, positions)
    return [p for p in positions if fractional_fits(ns, p, container)]


def host_fits(ns: NodeState, pod: PodRequest) -> bool:
    """kube-scheduler's NodeResourcesFit for CPU and memory."""
    return pod.cpu_milli <= ns.cpu_free and pod.memory_mib <= ns.mem_free
