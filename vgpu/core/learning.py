"""Learning the target workload online, from the pods the scheduler is asked to place.

FGD needs the distribution of task shapes it should keep room for. The paper computes it from the
whole trace before scheduling; a live extender has no trace, only the pods it has seen. A
`WorkloadLearner` keeps the shapes of the last `window` distinct pods it observed (so a workload
that drifts is tracked), blended with an optional prior worth `prior_weight` pods, and hands out a
`Workload` that is rebuilt only when enough has been learned since the last one: after 16, 128,
1024, ... observations and then every `refresh` pods, and adopted only if it moved by more than
`tolerance` plus the sampling noise expected for that many shapes (total variation). Adopting bumps `generation`, which tells callers that memoised
evaluations made with the old workload are stale, so it must stay rare: a stationary workload
settles after four or five adoptions.
"""

from __future__ import annotations

import math
from collections import Counter, deque

from vgpu.core.ids import PodKey
from vgpu.core.model import PodRequest
from vgpu.core.workload import TaskShape, Workload, shape_of, workload_from_counts


class WorkloadLearner:
    """A sliding-window shape histogram with a prior; `workload` is its current distribution."""

    def __init__(
        self,
        prior: Workload | None = None,
        *,
        prior_weight: float = 256.0,
        window: int = 4096,
        refresh: int = 4096,
        coverage: float = 0.95,
        tolerance: float = 0.05,
    ) -> None:
        if window < 1 or refresh < 1:
            raise ValueError("window and refresh must be positive")
        self.prior = prior if prior is not None else Workload((), ())
        self.prior_weight = prior_weight
        self.window = window
        self.refresh = refresh
        self.coverage = coverage
        self.tolerance = tolerance
        self.generation = 0
        self._recent: deque[TaskShape] = deque()
        self._counts: Counter[TaskShape] = Counter()
        self._seen: dict[PodKey, None] = {}
        self._since = 0
        self._total = 0
        self._next = 16
        self.workload = self._build()
        self.whole = self._build(coverage=1.0)
        """Every shape in the window with the prior, untruncated; rebuilt with `workload`. For
        measures that the dropped rare shapes would bias (e.g. `stranding.pressures`)."""

    @property
    def observed(self) -> int:
        """How many distinct pods have been observed (ever)."""
        return self._total

    def observe(self, pod: PodRequest) -> bool:
        """Count a pod's shape once per pod key; True if the workload was rebuilt."""
        if pod.key in self._seen:
            return False
        self._seen[pod.key] = None
        if len(self._seen) > 4 * self.window:  # forget old keys; retries come soon after
            for key in list(self._seen)[: 2 * self.window]:
                del self._seen[key]
        shape = shape_of(pod)
        self._recent.append(shape)
        self._counts[shape] += 1
        if len(self._recent) > self.window:
            old = self._recent.popleft()
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
        self._since += 1
        self._total += 1
        if self._since < self._next:
            return False
        self._since = 0
        self._next = min(8 * self._next, self.refresh)
        fresh = self._build()
        # Two samples of one distribution differ by about sqrt(k / 2πn) in total variation
        # (k shapes, n pods): only a move beyond that noise is worth re-scoring every node.
        noise = math.sqrt(len(fresh.shapes) / (2 * math.pi * max(1, len(self._recent))))
        if distance(fresh, self.workload) <= self.tolerance + noise:
            return False
        self.workload = fresh
        self.whole = self._build(coverage=1.0)
        self.generation += 1
        return True

    def _build(self, coverage: float | None = None) -> Workload:
        counts: Counter[TaskShape] = Counter()
        for shape, p in zip(self.prior.shapes, self.prior.probs, strict=True):
            counts[shape] += round(p * self.prior_weight)
        counts.update(self._counts)
        return workload_from_counts(counts, coverage=coverage or self.coverage)


def distance(a: Workload, b: Workload) -> float:
    """Total-variation distance between two shape distributions (0 same, 1 disjoint)."""
    pa = dict(zip(a.shapes, a.probs, strict=True))
    pb = dict(zip(b.shapes, b.probs, strict=True))
    return 0.5 * sum(abs(pa.get(s, 0.0) - pb.get(s, 0.0)) for s in pa.keys() | pb.keys())
