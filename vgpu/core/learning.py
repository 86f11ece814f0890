"""Learning the target workload online, from the pods the scheduler is asked to place.

FGD needs the distribution of task shapes it should keep room for. The paper computes it from the
whole trace before scheduling; a live extender has no trace, only the pods it has seen. A
`WorkloadLearner` keeps the shapes of the last `window` distinct pods it observed (so a workload
that drifts is tracked), blended with an optional prior worth `prior_weight` pods, and hands out a
`Workload` that is rebuilt only when enough has been learned since the last one: after 16, 32,
64, ... observations and then every `refresh` pods. A rebuild bumps `generation`, which tells
callers that memoised evaluations made with the old workload are stale.
"""

from __future__ import annotations

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
        refresh: int = 512,
        coverage: float = 0.95,
    ) -> None:
        if window < 1 or refresh < 1:
            raise ValueError("window and refresh must be positive")
        self.prior = prior if prior is not None else Workload((), ())
        self.prior_weight = prior_weight
        self.window = window
        self.refresh = refresh
        self.coverage = coverage
        self.generation = 0
        self._recent: deque[TaskShape] = deque()
        self._counts: Counter[TaskShape] = Counter()
        self._seen: dict[PodKey, None] = {}
        self._since = 0
        self._next = 16
        self.workload = self._build()

    @property
    def observed(self) -> int:
        """How many distinct pods have been observed (ever)."""
        return len(self._seen) if len(self._seen) < self.window else self._total

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
        self._total = getattr(self, "_total", 0) + 1
        if self._since >= self._next:
            self._since = 0
            self._next = min(2 * self._next, self.refresh)
            self.workload = self._build()
            self.generation += 1
            return True
        return False

    def _build(self) -> Workload:
        counts: Counter[TaskShape] = Counter()
        for shape, p in zip(self.prior.shapes, self.prior.probs, strict=True):
            counts[shape] += p * self.prior_weight  # type: ignore[assignment]
        counts.update(self._counts)
        return workload_from_counts(counts, coverage=self.coverage)
