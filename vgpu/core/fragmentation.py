"""Expected GPU fragmentation of a node over a target workload (the FGD measure).

For a task shape m, the GPU capacity of a node that m could never use is its *fragment*: all the
node's free GPU if m needs no GPU, cannot get enough CPU, or finds too few GPUs that fit it;
otherwise the free capacity of just those GPUs too small (or of a type m does not accept). A node's
expected fragmentation is the probability-weighted sum over shapes, in milli-GPUs.

Both GPU axes count: a GPU "fits" a shape only if it has the cores *and* the memory. The value
depends on the node only through its per-GPU (type, free cores, free memory) multiset and on how
many shapes its free CPU admits, so it is memoised on exactly that key: in a replay thousands of
nodes share a few thousand distinct keys.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import count

from vgpu.core.model import Gpu
from vgpu.core.state import NodeState
from vgpu.core.units import CORES_PER_GPU, memory_need_mmib
from vgpu.core.workload import Workload

_METERS = count()
"""Unique meter ids: `id()` may be reused once a meter is garbage collected, and node caches
outlive meters when a policy re-learns its workload."""

GpuKey = tuple[int, int, int]
"""(static GPU class id, free cores, free memory mMiB)."""
MEMO_LIMIT = 16_384
"""Node keys memoised before the memo is cleared: about 0.6 KB each on 8-GPU nodes, so at most
~10 MiB. A long-lived extender meets a new free-GPU multiset with nearly every pod it places;
unbounded, the memo grew with the pods scheduled (seen in the 100,000-pod soak,
`bench/handoff_soak.py`)."""


class FragmentMeter:
    """Computes (and memoises) expected fragmentation for one target workload."""

    def __init__(
        self, workload: Workload, *, residue_weight: float = 0.0, memo_limit: int = MEMO_LIMIT
    ) -> None:
        self.workload = workload
        self.residue_weight = residue_weight
        """Also count, with this weight, what is left on a GPU after packing it with as many
        copies of a fractional shape as fit (0: the paper's measure)."""
        shapes = workload.shapes
        self._levels = sorted({s.cpu_milli for s in shapes})
        self._level_of = [bisect_right(self._levels, s.cpu_milli) for s in shapes]
        self._classes: dict[tuple[str, int, bool], int] = {}
        self._class_info: list[tuple[tuple[bool, ...], tuple[int, ...], int, bool]] = []
        self._memo: dict[tuple[int, tuple[GpuKey, ...]], float] = {}
        self._memo_limit = memo_limit
        self._cache_key = ("fgd-classes", next(_METERS))

    def gpu_class(self, gpu: Gpu) -> int:
        """Interned id of a GPU's static properties (type, memory, health)."""
        key = (gpu.model, gpu.memory_mib, gpu.healthy)
        cid = self._classes.get(key)
        if cid is None:
            cid = len(self._class_info)
            self._classes[key] = cid
            allowed = tuple(
                gpu.healthy
                and s.gpus > 0
                and (s.selector.is_any or s.selector.allows_model(gpu.model))
                for s in self.workload.shapes
            )
            needs = tuple(
                memory_need_mmib(s.cores, s.memory_mib, gpu.memory_mib)
                if s.cores < CORES_PER_GPU
                else 0
                for s in self.workload.shapes
            )
            self._class_info.append((allowed, needs, gpu.memory_mib * 1000, gpu.healthy))
        return cid

    def allowed(self, cid: int) -> tuple[bool, ...]:
        """Per workload shape: could it run on a GPU of class `cid` (model, health, any GPU)?"""
        return self._class_info[cid][0]

    def classes_of(self, ns: NodeState) -> tuple[int, ...]:
        """The static class id of each GPU of a node (memoised on the node's static cache)."""
        key = self._cache_key
        hit = ns.cache.get(key)
        if hit is None:
            hit = tuple(self.gpu_class(g) for g in ns.gpus)
            ns.cache[key] = hit
        return hit  # type: ignore[return-value]

    def cpu_level(self, cpu_free: int) -> int:
        """How many distinct CPU demands of the workload fit in `cpu_free`."""
        return bisect_right(self._levels, cpu_free)

    def of_node(self, ns: NodeState) -> float:
        """Expected fragmentation of a node as it stands."""
        gpus = tuple(sorted(zip(self.classes_of(ns), ns.free_cores, ns.free_mem, strict=True)))
        return self.of_key(self.cpu_level(ns.cpu_free), gpus)

    def of_key(self, level: int, gpus: tuple[GpuKey, ...]) -> float:
        """Expected fragmentation for a CPU level and a sorted GPU multiset (memoised; the memo
        is emptied when it holds `memo_limit` keys)."""
        key = (level, gpus)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._compute(level, gpus)
            if len(self._memo) >= self._memo_limit:
                self._memo.clear()
            self._memo[key] = hit
        return hit

    def _compute(self, level: int, gpus: Sequence[GpuKey]) -> float:
        info = self._class_info
        # Unhealthy GPUs hold no usable capacity: neither free nor fragment.
        total = sum(fc * 10 for cid, fc, _ in gpus if info[cid][3])
        expected = 0.0
        shapes = self.workload.shapes
        for m, p in enumerate(self.workload.probs):
            shape = shapes[m]
            if shape.gpus == 0 or self._level_of[m] > level:
                expected += p * total
                continue
            usable, frag, residue = 0, 0, 0
            whole = shape.cores >= CORES_PER_GPU
            rw = self.residue_weight
            for cid, fc, fm in gpus:
                allowed, needs, total_mem, healthy = info[cid]
                if not allowed[m]:
                    if healthy:
                        frag += fc * 10
                    continue
                ok = (
                    (fc == CORES_PER_GPU and fm == total_mem)
                    if whole
                    else (fc >= shape.cores and fm >= needs[m])
                )
                if ok:
                    usable += 1
                    if rw and not whole:
                        copies = fc // shape.cores
                        if needs[m]:
                            copies = min(copies, fm // needs[m])
                        residue += (fc - copies * shape.cores) * 10
                else:
                    frag += fc * 10
            expected += p * (frag + rw * residue if usable >= shape.gpus else total)
        return expected

    def memo_size(self) -> int:
        """How many distinct node keys have been evaluated (for benchmarks)."""
        return len(self._memo)
