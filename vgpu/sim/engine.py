"""One replay: pods arrive one at a time, are placed by a policy or dropped, never deleted.

Metrics follow the FGD artifact: after every pod, the arrived GPU request (failed pods included)
and the allocated GPU, both as % of cluster GPU capacity. "Allocation at 100 %" is the mean of the
allocation over the arrivals whose arrived % rounds to 100 (each rounded to 2 decimals), as the
paper's analysis scripts compute it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random

from vgpu.core.ledger import Ledger
from vgpu.core.model import Node, PodRequest
from vgpu.core.placement import assignment_for
from vgpu.core.policy.interface import Policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.sim.dra import DeviceChooser


@dataclass(slots=True)
class RunResult:
    """What one (policy, seed) replay measured."""

    policy: str
    seed: int
    alloc_pct_at_100: float | None
    """None when the arrivals never reach 100 % of capacity (`--tune` below 1)."""
    alloc_pct_final: float
    pods_placed: int
    pods_failed: int
    seconds: float
    curve: list[tuple[float, float]] = field(default_factory=list)
    """(arrived %, allocated %) after each pod whose arrival crossed the next 1 % step."""
    extra: dict[str, float] = field(default_factory=dict)
    """Variant-specific measures (e.g. gangs admitted), shown in `--json`."""

    def as_json(self) -> dict[str, object]:
        """The `--json` form of one run."""
        return {
            "seed": self.seed,
            "alloc_pct_at_100": self.alloc_pct_at_100,
            "alloc_pct_final": self.alloc_pct_final,
            "pods_placed": self.pods_placed,
            "pods_failed": self.pods_failed,
            "seconds": round(self.seconds, 3),
            **self.extra,
        }


def capacity_milli(nodes: tuple[Node, ...]) -> int:
    """Cluster GPU capacity in milli-GPUs."""
    return sum(len(n.gpus) for n in nodes) * 1000


def mean_at_100(window: list[float], fallback: list[float]) -> float | None:
    """The mean allocation over the 100 % window, or over 99..101 % if that window is empty;
    None when arrivals never came near 100 % (there is no such figure, not a zero)."""
    values = window or fallback
    return round(sum(values) / len(values), 2) if values else None


@dataclass(slots=True)
class Tally:
    """Arrived and allocated GPU as % of capacity, the one rule every replay's figures follow."""

    policy: str
    seed: int
    capacity: int
    window: list[float] = field(default_factory=list)
    """Allocation % after each arrival whose arrived % rounds to 100."""
    near: list[float] = field(default_factory=list)
    """... rounds to 99 or 101 (the fallback when `window` is empty)."""
    started: float = field(default_factory=time.perf_counter)

    def pct(self, milli: int) -> float:
        """`milli` as % of capacity, rounded to 2 decimals."""
        return round(100 * milli / self.capacity, 2)

    def record(self, arrived: int, used: int) -> tuple[float, float]:
        """Note the allocation after an arrival; returns (arrived %, unrounded; allocated %)."""
        arrived_pct = 100 * arrived / self.capacity
        alloc_pct = self.pct(used)
        bucket = round(arrived_pct)
        if bucket == 100:
            self.window.append(alloc_pct)
        elif 99 <= bucket <= 101:
            self.near.append(alloc_pct)
        return arrived_pct, alloc_pct

    def result(
        self,
        used: int,
        placed: int,
        failed: int,
        *,
        curve: list[tuple[float, float]] | None = None,
        extra: dict[str, float] | None = None,
    ) -> RunResult:
        """The run's figures, `used` milli-GPUs allocated at the end."""
        return RunResult(
            policy=self.policy,
            seed=self.seed,
            alloc_pct_at_100=mean_at_100(self.window, self.near),
            alloc_pct_final=self.pct(used),
            pods_placed=placed,
            pods_failed=failed,
            seconds=time.perf_counter() - self.started,
            curve=curve or [],
            extra=extra or {},
        )


def replay(
    nodes: tuple[Node, ...],
    pods: list[PodRequest],
    policy: Policy,
    *,
    seed: int,
    on_progress: Callable[[int, int], None] | None = None,
    device_choice: DeviceChooser | None = None,
) -> RunResult:
    """Place `pods` in order on a fresh cluster of `nodes` with `policy`; `device_choice`, if
    given, picks the GPUs on the node the policy chose (`vgpu.sim.dra`)."""
    tally = Tally(policy.name, seed, capacity_milli(nodes))
    state = ClusterState(nodes)
    ledger = Ledger(state)
    scheduler = Scheduler(state, policy, rng=Random(seed))
    arrived = used = placed = failed = 0
    curve: list[tuple[float, float]] = []
    next_step = 0
    for i, pod in enumerate(pods):
        arrived += pod.gpu_milli
        selection = scheduler.select(pod)
        if selection is None:
            failed += 1
        else:
            if device_choice is None:
                ledger.confirm(selection.assignment)
            else:
                ns = state.node(selection.node)
                choice = device_choice(ns, pod, selection.choice)
                ledger.confirm(assignment_for(ns, pod, choice))
            used += pod.gpu_milli
            placed += 1
        arrived_pct, alloc_pct = tally.record(arrived, used)
        if arrived_pct >= next_step:
            curve.append((round(arrived_pct, 3), alloc_pct))
            next_step = int(arrived_pct) + 1
        if on_progress is not None and i % 1000 == 0:
            on_progress(i, len(pods))
    return tally.result(used, placed, failed, curve=curve)
