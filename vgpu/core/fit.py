"""Can this pod fit on this node? A `Verdict` value, never an exception.

The fast predicates (`vgpu.core.capacity`) are what placement and the simulator use; `check` adds
human reasons ("GPU 3: 20 cores free, 30 asked") and tells *resolvable* failures (the node could
host the pod once something is released) from *unresolvable* ones (wrong GPU type, too few GPUs,
GPU too small).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import Enum

from vgpu.core.capacity import idle_positions
from vgpu.core.model import ContainerRequest, PodRequest
from vgpu.core.placement import first_fit
from vgpu.core.state import NodeState
from vgpu.core.units import CORES_PER_GPU, memory_need_mmib, mib_to_mmib


class Code(Enum):
    """Why a pod does or does not fit a node."""

    FITS = "fits"
    INSUFFICIENT_CPU = "insufficient-cpu"
    INSUFFICIENT_MEMORY = "insufficient-memory"
    NO_GPU = "no-gpu"
    GPU_TYPE = "gpu-type"
    GPU_UNHEALTHY = "gpu-unhealthy"
    GPU_TOO_SMALL = "gpu-too-small"
    GPU_BUSY = "gpu-busy"


_UNRESOLVABLE = frozenset({Code.NO_GPU, Code.GPU_TYPE, Code.GPU_TOO_SMALL})


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to "does this pod fit this node", with reasons for people."""

    code: Code
    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the pod fits."""
        return self.code is Code.FITS

    @property
    def resolvable(self) -> bool:
        """Whether the node could host the pod once other pods release capacity."""
        return self.code not in _UNRESOLVABLE

    def __str__(self) -> str:
        return "; ".join(self.reasons) if self.reasons else self.code.value


FITS = Verdict(Code.FITS)


def check(ns: NodeState, pod: PodRequest) -> Verdict:
    """Does the pod fit on this node? Reasons name the first blocking resource."""
    if pod.cpu_milli > ns.cpu_free:
        return Verdict(
            Code.INSUFFICIENT_CPU,
            (f"CPU: {pod.cpu_milli}m asked, {ns.cpu_free}m free",),
        )
    if pod.memory_mib > ns.mem_free:
        return Verdict(
            Code.INSUFFICIENT_MEMORY,
            (f"memory: {pod.memory_mib} MiB asked, {ns.mem_free} MiB free",),
        )
    if not pod.wants_gpu:
        return FITS
    if first_fit(ns, pod) is not None:
        return FITS
    return _explain_gpu(ns, pod)


def fits_once_kubelet_frees(ns: NodeState, pod: PodRequest) -> bool:
    """Whether the pod would fit once the kubelet frees what it still holds for deleted pods
    (`Gpu.stale_*`, which it frees at its next Allocate or pod-resources `List`,
    docs/handshake.md); False when it holds nothing so. A what-if on a copy: the node's state is
    untouched."""
    if not any(g.stale_cores or g.stale_memory_mib for g in ns.gpus):
        return False
    view = copy.copy(ns)
    view.free_cores = [
        min(f + g.stale_cores, CORES_PER_GPU) for f, g in zip(ns.free_cores, ns.gpus, strict=True)
    ]
    view.free_mem = [
        min(f + mib_to_mmib(g.stale_memory_mib), t)
        for f, g, t in zip(ns.free_mem, ns.gpus, ns.total_mem, strict=True)
    ]
    view.cache, view.feed = {}, None
    return check(view, pod).ok


def _explain_gpu(ns: NodeState, pod: PodRequest) -> Verdict:
    if not ns.gpus:
        return Verdict(Code.NO_GPU, ("node has no GPUs",))
    allowed = [i for i, g in enumerate(ns.gpus) if pod.selector.allows(g)]
    if not allowed:
        models = sorted({g.model for g in ns.gpus})
        return Verdict(
            Code.GPU_TYPE,
            (f"no GPU of {pod.selector.describe()} (node has {', '.join(models)})",),
        )
    healthy = [i for i in allowed if ns.gpus[i].healthy]
    want = sum(c.gpus for c in pod.gpu_containers)
    if len(healthy) < len(allowed) and len(healthy) < want:
        bad = ", ".join(str(ns.gpus[i].index) for i in allowed if not ns.gpus[i].healthy)
        return Verdict(Code.GPU_UNHEALTHY, (f"GPU {bad} unhealthy; {want} GPU(s) asked",))
    if len(allowed) < want:
        return Verdict(Code.GPU_TOO_SMALL, (f"{want} GPUs asked, node has {len(allowed)}",))
    return _explain_capacity(ns, pod, healthy)


def _explain_capacity(ns: NodeState, pod: PodRequest, healthy: list[int]) -> Verdict:
    reasons: list[str] = []
    code = Code.GPU_BUSY
    for c in pod.gpu_containers:
        if c.whole:
            idle = idle_positions(ns, tuple(healthy))
            reasons.append(f"{c.gpus} whole GPU(s) asked, {len(idle)} idle")
            continue
        if all(not _could_ever_fit(ns, p, c) for p in healthy):
            code = Code.GPU_TOO_SMALL
        best = max(healthy, key=lambda p: (ns.free_cores[p], ns.free_mem[p]))
        need = memory_need_mmib(c.cores, c.memory_mib, ns.gpus[best].memory_mib)
        reasons.append(
            f"no GPU with {c.cores} cores and {_fmt_mib(need)} free; best: GPU "
            f"{ns.gpus[best].index} with {ns.free_cores[best]} cores and "
            f"{_fmt_mib(ns.free_mem[best])}"
        )
    return Verdict(code, tuple(reasons) + _stale_notes(ns, healthy))


def _stale_notes(ns: NodeState, positions: list[int]) -> tuple[str, ...]:
    """What the kubelet still counts for deleted pods on these GPUs (inventory `kubeletStale`).

    That capacity is taken but no pod holds it, so without a word the free figures above look
    wrong; it comes back once the node agent has the kubelet free it (docs/handshake.md).
    """
    return tuple(
        f"GPU {g.index}: the kubelet still holds {g.stale_cores} cores and "
        f"{g.stale_memory_mib} MiB for deleted pods"
        for g in (ns.gpus[p] for p in positions)
        if g.stale_cores or g.stale_memory_mib
    )


def _could_ever_fit(ns: NodeState, pos: int, c: ContainerRequest) -> bool:
    need = memory_need_mmib(c.cores, c.memory_mib, ns.gpus[pos].memory_mib)
    return ns.total_mem[pos] >= need


def _fmt_mib(mmib: int) -> str:
    mib = mmib / 1000
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"
