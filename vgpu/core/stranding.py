"""CPU stranding: free GPU on a node that its free CPU cannot feed.

FGD's measure notices CPU only when a whole task shape stops fitting, so it will fill an 8-GPU
node's CPU with CPU-only pods and strand its GPUs. The default policy adds the free GPU that the
node's free CPU cannot feed to the node's fragmentation. "Feed" is measured against the target
workload's GPU shapes *that could run on the node* (a shape whose GPU models exclude the node
already counts all of its free GPU as fragment). The default policy weighs the term down on a
node whose GPU model type-constrained shapes claim (`pressures`, `core.model_demand`): there the
term's pull (CPU-light pods onto CPU-poor nodes) hands scarce models to pods that could run
anywhere, which measured worse than no term at all (docs/research/policies.md, GPU-type
constraints).

* ``mean``: one ratio, the expected CPU per GPU over those shapes; the stranded GPU is what the
  free CPU cannot feed at that ratio, weighted by those shapes' share of the GPU demand.
* ``shape``: the expectation over those shapes of what each alone could not feed
  (``max(0, free GPU - free CPU × its GPU per CPU)``), each weighted by its share of the GPU
  demand. Evaluated in O(log shapes) from prefix sums over shapes sorted by GPU per CPU.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from vgpu.core.workload import Workload


@dataclass(frozen=True, slots=True)
class Feed:
    """Shapes' GPU per CPU (ascending) with prefix sums of their weights and weight × ratio."""

    ratios: tuple[float, ...]
    weights: tuple[float, ...]
    """weights[t]: total weight of the first t shapes (weights[0] = 0)."""
    moments: tuple[float, ...]
    """moments[t]: total weight × ratio of the first t shapes."""

    def stranded(self, cpu_free: int, free_milli: float) -> float:
        """Expected free GPU (milli) that the free CPU cannot feed."""
        if free_milli <= 0:
            return 0.0
        t = len(self.ratios) if cpu_free <= 0 else bisect_left(self.ratios, free_milli / cpu_free)
        return max(0.0, self.weights[t] * free_milli - cpu_free * self.moments[t])


NO_FEED = Feed((), (0.0,), (0.0,))


def feed(
    workload: Workload, allowed: Sequence[bool] | None, *, per_shape: bool, weight: float = 1.0
) -> Feed:
    """The feed of a node on which the workload's shapes `allowed` may run (None: all), its
    stranding scaled by `weight`."""
    terms: list[tuple[float, float]] = []  # (GPU milli per CPU milli, weight)
    cpu = gpu = total = 0.0
    for m, (shape, p) in enumerate(zip(workload.shapes, workload.probs, strict=True)):
        if not shape.gpus:
            continue
        milli = p * shape.gpus * shape.cores * 10
        total += milli
        if allowed is not None and not allowed[m]:
            continue
        cpu += p * shape.cpu_milli
        gpu += milli
        if shape.cpu_milli:
            terms.append((shape.gpus * shape.cores * 10 / shape.cpu_milli, milli))
    if not gpu or not cpu or weight <= 0:
        return NO_FEED
    total /= weight
    if not per_shape:
        terms = [(gpu / cpu, gpu)]
    terms.sort()
    ratios = tuple(k for k, _ in terms)
    weights = tuple(accumulate((w / total for _, w in terms), initial=0.0))
    moments = tuple(accumulate((k * w / total for k, w in terms), initial=0.0))
    return Feed(ratios, weights, moments)


def pressures(
    workload: Workload, allowed: Sequence[Sequence[bool]], counts: Sequence[int]
) -> list[float]:
    """Per GPU class: the share of its capacity that GPU-type-constrained shapes claim.

    `allowed[c][m]`: may shape m run on a GPU of class c; `counts[c]`: healthy GPUs of class c in
    the cluster. Each constrained shape's share of the workload's GPU demand is spread over the
    classes it allows in proportion to their capacity, as if the arrivals filled the cluster; a
    class's pressure is what it receives over its own share of the capacity (0: no constrained
    demand, 1: constrained pods alone would fill it). Unconstrained shapes claim nothing.
    """
    gpus = sum(counts)
    demand = [p * s.gpus * s.cores for s, p in zip(workload.shapes, workload.probs, strict=True)]
    total = sum(demand)
    got = [0.0] * len(counts)
    if not gpus or not total:
        return got
    for m, shape in enumerate(workload.shapes):
        if not demand[m] or shape.selector.is_any:
            continue
        where = [c for c, row in enumerate(allowed) if row[m] and counts[c]]
        capacity = sum(counts[c] for c in where) / gpus
        for c in where:
            got[c] += demand[m] / total / capacity
    return got
