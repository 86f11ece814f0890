"""Queues and what each deserves: kube-batch's proportion, counted in vGPU units.

A queue has a weight, an optional cap and an opt-in reclaim. What it **deserves** is its weight's
part of the cluster, never more than it asks (allocated plus pending) or its cap, handed out by
water-filling: capacity that a queue does not ask for flows to the others in proportion to their
weights. kube-batch's `proportion` plugin adds `remaining x weight / sum(weights)` round by round;
the fixed point of those rounds is, on each dimension, the water level `L` with
`sum(min(target_q, L x weight_q)) = capacity`, which is computed here directly and exactly
(`Fraction`), so the result does not depend on the order of the queues or on rounding per round.
Each dimension (cores, memory units) is filled on its own, as KAI-Scheduler's resource division
does, so a queue that asks only cores never holds memory it will not use.

The exact levels are rounded down to whole units and the leftovers dealt one unit at a time by
largest remainder (ties by name), so deserved shares are integers, sum to at most the capacity
and differ from the exact split by less than one unit. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from vgpu.core.errors import ConfigError

Vec = tuple[int, int]  # (core units, memory units)
ZERO: Vec = (0, 0)
DIMENSIONS = ("cores", "memory")
UNCAPPED = 2**62
"""A cap's value on a dimension the operator left out: no cap on it."""


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One queue as the operator configures it."""

    name: str
    weight: int = 1
    cap: Vec | None = None  # at most this much, whatever the cluster has idle
    reclaim: bool = False  # may take back from queues above what they deserve
    strict_s: float = 0.0  # >0: hold other queues back this long while its head does not fit

    def __post_init__(self) -> None:
        where = f"queue {self.name!r}"
        if not self.name or len(self.name) > 63:
            raise ConfigError(f"{where}: name must be 1 to 63 characters")
        if isinstance(self.weight, bool) or not isinstance(self.weight, int) or self.weight < 1:
            raise ConfigError(f"{where}: weight {self.weight!r} must be a whole number >= 1")
        if self.cap is not None and any(v < 0 for v in self.cap):
            raise ConfigError(f"{where}: cap {self.cap!r} must not be negative")
        if not 0.0 <= self.strict_s <= 86_400.0 or math.isnan(self.strict_s):
            raise ConfigError(f"{where}: strict hold {self.strict_s!r} s must be 0 to 86400")


def add(a: Vec, b: Vec) -> Vec:
    return (a[0] + b[0], a[1] + b[1])


def sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1])


def fits_within(a: Vec, b: Vec) -> bool:
    """Whether `a` is at most `b` on every dimension."""
    return a[0] <= b[0] and a[1] <= b[1]


def cap_text(cap: Vec) -> str:
    """A cap as an operator wrote it: only the dimensions it caps (`UNCAPPED` ones left out)."""
    words = ("cores", "memory units")
    parts = [f"{v} {w}" for v, w in zip(cap, words, strict=True) if v < UNCAPPED]
    return " and ".join(parts) or "no cap"


def target(spec: QueueSpec, request: Vec) -> Vec:
    """What a queue can use at most: its request, capped."""
    if spec.cap is None:
        return request
    return (min(request[0], spec.cap[0]), min(request[1], spec.cap[1]))


def _level(capacity: int, targets: Sequence[int], weights: Sequence[int]) -> Fraction:
    """The water level L with sum(min(t, L w)) = capacity (or the highest needed level)."""
    order = sorted(range(len(targets)), key=lambda i: Fraction(targets[i], weights[i]))
    left, weight_left = Fraction(capacity), sum(weights)
    for i in order:
        if weight_left == 0:
            break
        level = left / weight_left
        if Fraction(targets[i], weights[i]) > level:
            return level
        left -= targets[i]
        weight_left -= weights[i]
    return Fraction(max((Fraction(t, w) for t, w in zip(targets, weights, strict=True)), default=0))


def _fill(
    capacity: int, names: Sequence[str], targets: Sequence[int], weights: Sequence[int]
) -> list[int]:
    """One dimension: exact water-filling, rounded down, leftovers by largest remainder."""
    level = _level(capacity, targets, weights)
    exact = [min(Fraction(t), level * w) for t, w in zip(targets, weights, strict=True)]
    whole = [math.floor(x) for x in exact]
    spare = min(capacity, sum(targets)) - sum(whole)
    by_remainder = sorted(range(len(names)), key=lambda i: (-(exact[i] - whole[i]), names[i]))
    for i in by_remainder:
        if spare <= 0:
            break
        if whole[i] < targets[i] and exact[i] > whole[i]:
            whole[i] += 1
            spare -= 1
    return whole


def deserved(
    capacity: Vec, specs: Sequence[QueueSpec], requests: Mapping[str, Vec]
) -> dict[str, Vec]:
    """Each queue's deserved (cores, memory units); a queue absent from `requests` asks nothing."""
    names = [s.name for s in specs]
    weights = [s.weight for s in specs]
    targets = [target(s, requests.get(s.name, ZERO)) for s in specs]
    per_dim = [
        _fill(capacity[d], names, [t[d] for t in targets], weights) for d in range(len(DIMENSIONS))
    ]
    return {name: (per_dim[0][i], per_dim[1][i]) for i, name in enumerate(names)}


def share(allocated: Vec, deserves: Vec) -> Fraction:
    """A queue's share: the larger of allocated / deserved over the dimensions it uses.

    A dimension the queue holds nothing of does not count; holding something of a dimension it
    deserves none of counts as far over (it is served last).
    """
    worst = Fraction(0)
    for held, due in zip(allocated, deserves, strict=True):
        if held <= 0:
            continue
        worst = max(worst, Fraction(held, due) if due > 0 else Fraction(10**9))
    return worst


def overused(allocated: Vec, deserves: Vec) -> bool:
    """Whether a queue holds its deserved share: at or over what it deserves on its dominant
    dimension (`share` >= 1), one rule for the fair order, strict holds and reclaim.

    kube-batch calls a queue overused when it holds at least its deserved on *every* dimension.
    That works where every queue deserves a part of every dimension (kube-batch's water-filling
    adds to a queue's whole vector), or where deserved is a hard cap on the task's own dimensions
    (Volcano's proportion). Here deserved is filled per dimension and never exceeds what a queue
    asks, so on a dimension only one queue asks (`vgpu.io/memory`) it deserves all it asks and
    never holds that while a pod of it waits: "every dimension" would never hold, and that queue
    would be served ahead of queues with lower shares for good. A dimension a queue alone asks
    cannot make it look starved this way: it only enters through the dominant ratio.

    `share(allocated, deserves) >= 1`, decided without fractions: a dimension's ratio is at
    least 1 exactly when the queue holds some of it and at least what it deserves of it (or
    deserves none). A release pass asks this for every job it tries.
    """
    return any(
        held > 0 and (due <= 0 or held >= due)
        for held, due in zip(allocated, deserves, strict=True)
    )
