"""How much of each GPU model the GPU-type-constrained part of the workload claims: the
demand on GPU models (not a DRA ResourceClaim, `vgpu.api.dra`).

A pod that names the GPU models it accepts can only use those; a pod that names none can run
anywhere. When the constrained pods' demand for a model approaches its capacity, every GPU of it
that an unconstrained pod takes is one a constrained pod will miss later (docs/research/policies.md,
GPU-type constraints). FGD's measure sees this only through the constrained shapes' share of the
workload, which is weak when they are a minority; the default policy uses the *claim* of each GPU
class (`stranding.pressures`: constrained demand spread over the models each shape allows, against
their capacity) twice:

* CPU stranding on a node weighs ``1 - claim`` (floored at 0): its pull (CPU-light pods onto
  CPU-poor nodes, CPU-heavy ones onto CPU-rich nodes) is what hands claimed GPUs to free pods;
* taking a claimed GPU costs ``reserve`` × its ramp (0 below claim `lo`, 1 from claim 1 up) per
  milli-GPU, above the cheapest class the pod may use: a pod that must use claimed GPUs pays
  nothing extra, one that could go elsewhere is sent there.

The capacity is what the policy has seen: the GPUs of every node it has scored, recounted before
the next pod after a new node shows up (the extender and the simulator both score through the
policy, so both count the same way). With no constrained shape every claim is 0 and both terms
are exactly the policy's old ones.
"""

from __future__ import annotations

from vgpu.core.fragmentation import FragmentMeter
from vgpu.core.model import GpuSelector, Node
from vgpu.core.stranding import pressures
from vgpu.core.workload import Workload


class ModelDemand:
    """Per GPU class: the claim of constrained shapes, and what it costs to take such a GPU."""

    def __init__(self, *, reserve: float, lo: float) -> None:
        self.reserve = reserve
        self.lo = lo
        self.claim: list[float] = []
        self._rate: list[float] = []
        self._models: dict[int, str] = {}
        self._floors: dict[tuple[tuple[str, ...], tuple[str, ...]], float] = {}
        """Per selector's models (only models matter: a selector naming GPUs by UUID, such as a
        pod kept off idle GPUs by `queues.whole_gpus`, must not grow the table)."""
        self._nodes: dict[str, Node] = {}
        self.dirty = False
        """A node was first seen (or changed) since the claims were last counted."""

    def note(self, node: Node) -> None:
        """Count a scored node's GPUs from the next `refresh` on."""
        if self._nodes.get(node.name) is not node:
            self._nodes[node.name] = node
            self.dirty = True

    def refresh(self, meter: FragmentMeter, whole: Workload) -> bool:
        """Recount over `whole` (every learned shape: truncation drops the rare constrained
        ones) with `meter`'s class ids; True if any claim changed."""
        self.dirty = False
        counts: dict[int, int] = {}
        models: dict[int, str] = {}
        for node in self._nodes.values():
            for g in node.gpus:
                if g.healthy:
                    cid = meter.gpu_class(g)
                    counts[cid] = counts.get(cid, 0) + 1
                    models[cid] = g.model
        size = max(counts, default=-1) + 1
        allowed = [
            tuple(
                c in models
                and s.gpus > 0
                and (s.selector.is_any or s.selector.allows_model(models[c]))
                for s in whole.shapes
            )
            for c in range(size)
        ]
        claim = pressures(whole, allowed, [counts.get(c, 0) for c in range(size)])
        changed = _nonzero(claim) != _nonzero(self.claim)
        self.claim, self._models = claim, models
        self._rate = [self.reserve * self._ramp(p) for p in claim]
        self._floors.clear()
        return changed

    def _ramp(self, claim: float) -> float:
        if self.lo >= 1:
            return float(claim >= 1)
        return min(1.0, max(0.0, (claim - self.lo) / (1 - self.lo)))

    def of(self, cid: int) -> float:
        """The claim on GPU class `cid` (0 for a class not counted yet)."""
        return self.claim[cid] if cid < len(self.claim) else 0.0

    def cost(self, selector: GpuSelector, cid: int, cores: int) -> float:
        """Growth (milli-GPU) for taking `cores` of a GPU of class `cid`, above the cheapest
        class `selector` allows."""
        rate = self._rate[cid] if cid < len(self._rate) else 0.0
        if not rate:
            return 0.0
        kind = (selector.include_models, selector.exclude_models)
        floor = self._floors.get(kind)
        if floor is None:
            models = self._models
            floor = self._floors[kind] = min(
                (
                    r
                    for c, r in enumerate(self._rate)
                    if c in models and selector.allows_model(models[c])
                ),
                default=0.0,
            )
        return (rate - floor) * cores * 10


def _nonzero(claim: list[float]) -> dict[int, float]:
    return {c: v for c, v in enumerate(claim) if v}
