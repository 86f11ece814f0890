"""Where the queues' share-over-time chart gets its samples: the extender's metrics in
Prometheus when `--prometheus` names one, else (and whenever Prometheus fails) the view's own
samples since it started. Each answer says which, in a line the page shows.

Only the leader runs the queue pass and exports its gauges; a scrape during a change of leader
can still see two replicas' series, so the query keeps the one whose `vgpu_extender_leader` is 1.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from vgpu.adapters.prometheus import PrometheusError, Series, query_range
from vgpu.inspect.web.sharechart import Sample

LEADER_SHARE = (
    "max by (queue) (vgpu_extender_queue_share and on (instance) (vgpu_extender_leader == 1))"
)
WINDOW_S = 3600.0
STEP_S = 30.0
CACHE_S = 30.0
"""A range query at most this often, however many pages ask."""

Shares = Callable[[], tuple[Sequence[Sample], str]]
"""The chart's samples, oldest first, and where they came from."""

OWN = "From the view's own reads since it started."


def own(samples: Callable[[], Sequence[Sample]]) -> Shares:
    return lambda: (samples(), OWN)


class PrometheusShares:
    """The last hour of the leader's `vgpu_extender_queue_share`, with `fallback` when the query
    fails."""

    def __init__(
        self,
        url: str,
        fallback: Callable[[], Sequence[Sample]],
        *,
        clock: Callable[[], float] = time.time,
        fetch: Callable[..., list[Series]] = query_range,
    ) -> None:
        self._url, self._fallback, self._clock, self._fetch = url, fallback, clock, fetch
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Sample]] | None = None

    def __call__(self) -> tuple[Sequence[Sample], str]:
        now = self._clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < CACHE_S:
                return self._cached[1], self._note()
        try:
            series = self._fetch(self._url, LEADER_SHARE, now - WINDOW_S, now, STEP_S)
        except PrometheusError as e:
            return self._fallback(), f"{e}; {OWN[0].lower()}{OWN[1:]}"
        samples = merge(series)
        with self._lock:
            self._cached = (now, samples)
        return samples, self._note()

    def _note(self) -> str:
        return f"From the extender's vgpu_extender_queue_share in Prometheus ({self._url})."


def merge(series: Sequence[Series]) -> list[Sample]:
    """Per-queue series -> one sample per time, each with the queues that have a value then."""
    at: dict[float, dict[str, float]] = {}
    for labels, points in series:
        queue = labels.get("queue", "")
        for t, v in points:
            at.setdefault(t, {})[queue] = v
    return sorted(at.items())
