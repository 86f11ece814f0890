"""What a queued replay measures, and the fairness figures computed from it.

Every minute the replay samples the cores each queue holds and what each deserves (`Sample`). From
the samples, per queue:

* **share**: its part of the cores the queues use, in %; its **deserved share** is its part of the
  summed deserved cores (75 % for B with weights 1:3 and both queues asking more than the cluster);
* **minutes to converge**: from the queue's start to the first sample from which its share stays
  within `BAND` points of its deserved share *at the end* until the end (None: it never settles
  there). At the end every queue has a backlog, so that is its weight's share (75 % for B with
  weights 1:3); earlier, while a queue asks less than its weight's share, it deserves only what
  it asks, which it gets at once, and measuring against that would call it converged at once;
* evictions and lost GPU-hours (the run time evicted pods had had), wait p50/p95 (arrival to start;
  pods still waiting at the end count with the time they have waited so far);
* what it held when the last queue started and how long that had left to run (`Left`): without
  reclaim a later queue gains only as those pods end, so what is left of them after an hour, or
  three, bounds how fast it can reach its share whatever the release order.

And for the cluster: **utilisation** (used cores over capacity) and **Jain's index** over the
queues of share / deserved share, both averaged over the samples after the last queue starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

BAND = 5.0
"""Points (of %) within which a queue's share counts as its deserved share."""


@dataclass(frozen=True, slots=True)
class Sample:
    """Cores each queue holds and deserves at one time."""

    at: float
    used: dict[str, int]
    due: dict[str, int]

    def share(self, queue: str) -> float | None:
        """The queue's % of used cores (None while nothing is used)."""
        total = sum(self.used.values())
        return 100.0 * self.used.get(queue, 0) / total if total else None

    def deserved_share(self, queue: str) -> float | None:
        """The queue's % of the deserved cores (None while no queue deserves anything)."""
        total = sum(self.due.values())
        return 100.0 * self.due.get(queue, 0) / total if total else None


@dataclass(frozen=True, slots=True)
class Left:
    """A pod running when the last queue started: its cores and the seconds it had left to run."""

    cores: int
    seconds: float


def still_running_pct(left: list[Left], after_s: float, capacity: int) -> float | None:
    """% of the cluster's cores these pods still hold `after_s` later, if none is evicted."""
    if not capacity:
        return None
    return 100.0 * sum(p.cores for p in left if p.seconds > after_s) / capacity


def remaining_median(left: list[Left]) -> float | None:
    """The core-weighted median of the run time left (seconds): half the cores held are free
    by then, if none is evicted."""
    total = sum(p.cores for p in left)
    seen = 0
    for p in sorted(left, key=lambda p: p.seconds):
        seen += p.cores
        if 2 * seen >= total:
            return p.seconds
    return None


@dataclass(slots=True)
class Tallies:
    """Counts kept while replaying."""

    names: tuple[str, ...]
    capacity: int
    samples: list[Sample] = field(default_factory=list)
    waits: dict[str, list[float]] = field(init=False)
    evictions: dict[str, int] = field(init=False)
    lost_core_s: dict[str, float] = field(init=False)
    starts: dict[str, int] = field(init=False)
    left: dict[str, list[Left]] | None = None
    """Per queue, its pods running when the last queue started (set once, then)."""
    _first: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.waits = {n: [] for n in self.names}
        self.evictions = dict.fromkeys(self.names, 0)
        self.lost_core_s = dict.fromkeys(self.names, 0.0)
        self.starts = dict.fromkeys(self.names, 0)

    def started(self, queue: str, waited: float, key: str) -> int:
        """A pod started; its first start counts its wait. Returns its start's serial."""
        self.starts[queue] += 1
        if key not in self._first:
            self._first.add(key)
            self.waits[queue].append(waited)
        return self.starts[queue]

    def censored(self, queue: str, waited: float) -> None:
        """A pod still waiting at the end (one that ran and was evicted has its wait already)."""
        self.waits[queue].append(waited)

    def evicted(self, queue: str, core_s: float) -> None:
        """A pod of `queue` was evicted after `core_s` core-seconds of work."""
        self.evictions[queue] += 1
        self.lost_core_s[queue] += core_s


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def converge_minutes(
    samples: list[Sample], queue: str, start_s: float, target: float
) -> float | None:
    """Minutes from `start_s` until the queue's share settles within BAND of `target` (%)."""
    settled: float | None = None
    for s in samples:
        if s.at < start_s:
            continue
        share = s.share(queue)
        inside = share is not None and abs(share - target) <= BAND
        if not inside:
            settled = None
        elif settled is None:
            settled = s.at
    return None if settled is None else (settled - start_s) / 60.0


def jain(samples: list[Sample], names: tuple[str, ...]) -> float | None:
    """Mean over samples of Jain's index of share / deserved share over the queues."""
    values = []
    for s in samples:
        xs = []
        for n in names:
            share, due = s.share(n), s.deserved_share(n)
            if share is not None and due:
                xs.append(share / due)
        if xs and any(xs):
            values.append(sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)))
    return sum(values) / len(values) if values else None


def utilisation(samples: list[Sample], capacity: int) -> float | None:
    """Mean % of the cluster's cores in use over the samples."""
    if not samples or not capacity:
        return None
    return 100.0 * sum(sum(s.used.values()) for s in samples) / (len(samples) * capacity)
