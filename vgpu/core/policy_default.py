"""vgpu's default placement policy: FGD's fragmentation measure, learned online, with packing ties.

Experimental knobs for now; see docs/policies.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from random import Random

from vgpu.core.fgd import sigmoid_score
from vgpu.core.fit import candidates, host_fits
from vgpu.core.fragmentation import FragmentMeter, GpuKey
from vgpu.core.learning import WorkloadLearner
from vgpu.core.model import PodRequest
from vgpu.core.placement import Choice, choose, share_of
from vgpu.core.policies import Evaluation, Policy
from vgpu.core.state import NodeState
from vgpu.core.units import CORES_PER_GPU
from vgpu.core.workload import Workload


@dataclass(frozen=True, slots=True)
class DefaultConfig:
    """The policy's knobs (each one is an ablation row in docs/policies.md)."""

    band: float = 0.0
    """Fragmentation growths within one band count as equal; 0: FGD's sigmoid buckets."""
    tie: str = "packed"
    """Secondary key among equal bands: "order" (node order), "packed" (fullest node)."""
    gpu_tie: str = "index"
    """Among equal GPUs inside a node: "index" (lowest) or "fullest"."""
    online: bool = True
    """Learn the workload from observed pods (the prior is only a prior)."""
    prior_weight: float = 256.0


class DefaultPolicy(Policy):
    """Least growth of expected fragmentation (banded), then the fullest node."""

    name = "default"
    random_ties = False

    def __init__(self, workload: Workload, config: DefaultConfig | None = None) -> None:
        self.config = config or DefaultConfig()
        self.learner: WorkloadLearner | None = None
        if self.config.online:
            self.learner = WorkloadLearner(workload, prior_weight=self.config.prior_weight)
            workload = self.learner.workload
        self.meter = FragmentMeter(workload)
        self.generation = 0

    def observe(self, pod: PodRequest) -> None:
        """Learn from a pod about to be placed (rebuilds the meter now and then)."""
        if self.learner is not None and self.learner.observe(pod):
            self.meter = FragmentMeter(self.learner.workload)
            self.generation += 1

    def _primary(self, reduction: float) -> float:
        band = self.config.band
        if band <= 0:
            return sigmoid_score(reduction)
        return float(math.floor(reduction / band + 1e-9))

    def _secondary(self, ns: NodeState, pod: PodRequest, used_after: int) -> float:
        if self.config.tie == "packed" and ns.gpus:
            return 0.999 * used_after / (len(ns.gpus) * CORES_PER_GPU)
        return 0.0

    def evaluate(self, ns: NodeState, pod: PodRequest, rng: Random) -> Evaluation | None:
        if not host_fits(ns, pod):
            return None
        meter = self.meter
        classes = meter.classes_of(ns)
        gpus: list[GpuKey] = list(zip(classes, ns.free_cores, ns.free_mem, strict=True))
        before = meter.of_key(meter.cpu_level(ns.cpu_free), tuple(sorted(gpus)))
        level = meter.cpu_level(ns.cpu_free - pod.cpu_milli)
        used = len(gpus) * CORES_PER_GPU - sum(ns.free_cores)
        wanting = pod.gpu_containers
        if len(wanting) == 1 and not wanting[0].whole:
            c = wanting[0]
            cands = candidates(ns, c, pod.selector)
            if not cands:
                return None
            best: tuple[float, float, int] | None = None
            seen: set[GpuKey] = set()
            for p in cands:
                if gpus[p] in seen:
                    continue
                seen.add(gpus[p])
                cores, mem = share_of(ns, p, c)
                cid, fc, fm = gpus[p]
                gpus[p] = (cid, fc - cores, fm - mem)
                after = meter.of_key(level, tuple(sorted(gpus)))
                gpus[p] = (cid, fc, fm)
                prim = self._primary(before - after)
                inner = -fc if self.config.gpu_tie == "fullest" else 0
                key = (prim, inner, -p)
                if best is None or key > best:
                    best = key
            assert best is not None
            score = best[0] + self._secondary(ns, pod, used + c.cores)
            return Evaluation(score, ((-best[2],),))
        choice: Choice = ()
        if wanting:
            found = choose(ns, pod)
            if found is None:
                return None
            choice = found
            for c, positions in zip(wanting, choice, strict=True):
                for p in positions:
                    cores, mem = share_of(ns, p, c)
                    cid, fc, fm = gpus[p]
                    gpus[p] = (cid, fc - cores, fm - mem)
                    used += cores
        after = meter.of_key(level, tuple(sorted(gpus)))
        return Evaluation(self._primary(before - after) + self._secondary(ns, pod, used), choice)
