"""One queued replay from the flags to its figures: arrivals, the replay, the fairness figures.

`run` returns a `QueueResult`: per queue the figures of `vgpu.sim.fairness`, the cluster's
utilisation and Jain's index over the measured window (after the last queue starts), and the share
series the plot draws.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vgpu.core.model import Node
from vgpu.core.policy.specs import PolicySpec, make_policy
from vgpu.core.workload import Workload
from vgpu.sim.fairness import (
    Tallies,
    converge_minutes,
    jain,
    percentile,
    remaining_median,
    still_running_pct,
    utilisation,
)
from vgpu.sim.poisson import generate
from vgpu.sim.queues.replay import QueuedReplay
from vgpu.sim.queues.settings import QueueSetup
from vgpu.sim.trace import Trace


@dataclass(slots=True)
class QueueResult:
    """What one queued replay measured."""

    setup: QueueSetup
    seed: int
    arrivals: int
    seconds: float
    utilisation_pct: float | None
    jain: float | None
    queues: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    series: list[dict[str, float]] = field(default_factory=list)
    """Per sample: minutes, then each queue's share of used cores in %, and "used" (% of cores)."""


def sample_nodes(nodes: tuple[Node, ...], count: int) -> tuple[Node, ...]:
    """`count` GPU nodes spread evenly over the node list (every k-th), so the mix of models and
    sizes is the trace's; all of them when `count` is 0 or more than there are."""
    gpu_nodes = tuple(n for n in nodes if n.gpus)
    if count <= 0 or count >= len(gpu_nodes):
        return gpu_nodes
    step = len(gpu_nodes) / count
    return tuple(gpu_nodes[int(i * step)] for i in range(count))


def run(
    trace: Trace,
    lifetimes: dict[str, float],
    setup: QueueSetup,
    policy: PolicySpec,
    *,
    seed: int,
    node_count: int = 0,
    progress: Callable[[float], None] | None = None,
) -> QueueResult:
    """Replay `setup` on the trace (its first `node_count` spread nodes, or all) with `policy`;
    `lifetimes` are the trace pods' (`poisson.parse_lifetimes`); `progress` is told the
    simulated seconds as the replay goes (`QueuedReplay.run`)."""
    started = time.perf_counter()
    nodes = sample_nodes(trace.nodes, node_count)
    cores = sum(len(n.gpus) for n in nodes) * 100
    arrivals = generate(setup, trace.pods, lifetimes, cluster_cores=cores, seed=seed)
    replay = QueuedReplay(nodes, make_policy(policy, Workload((), ())), setup, seed)
    tallies = replay.run(arrivals, progress)
    return figures(setup, seed, len(arrivals), tallies, time.perf_counter() - started)


def figures(
    setup: QueueSetup, seed: int, arrivals: int, tallies: Tallies, seconds: float
) -> QueueResult:
    """The result's figures from what the replay tallied."""
    measured = [s for s in tallies.samples if s.at >= setup.last_start_s]
    result = QueueResult(
        setup,
        seed,
        arrivals,
        seconds,
        _round(utilisation(measured, tallies.capacity)),
        _round(jain(measured, setup.names), 4),
    )
    for name in setup.names:
        shares = [v for v in (s.share(name) for s in measured) if v is not None]
        due = [v for v in (s.deserved_share(name) for s in measured) if v is not None]
        start = setup.start_s.get(name, 0.0)
        result.queues[name] = {
            "weight": next(s.weight for s in setup.specs if s.name == name),
            "start_min": start / 60,
            "deserved_share_pct": _round(due[-1] if due else None),
            "share_mean_pct": _round(sum(shares) / len(shares) if shares else None),
            "share_final_pct": _round(shares[-1] if shares else None),
            "converge_min": _round(
                converge_minutes(tallies.samples, name, start, due[-1]) if due else None
            ),
            "evictions": tallies.evictions[name],
            "lost_gpu_hours": _round(tallies.lost_core_s[name] / 100 / 3600),
            "wait_p50_min": _round(_minutes(percentile(tallies.waits[name], 50))),
            "wait_p95_min": _round(_minutes(percentile(tallies.waits[name], 95))),
            "started": tallies.starts[name],
            **_left(tallies, name),
        }
    for s in tallies.samples:
        point = {"min": round(s.at / 60, 1)}
        for name in setup.names:
            point[name] = _round(s.share(name)) or 0.0
        point["used"] = _round(100 * sum(s.used.values()) / tallies.capacity) or 0.0
        result.series.append(point)
    return result


def _left(tallies: Tallies, name: str) -> dict[str, float | int | None]:
    """What the queue held when the last queue started, and what of it is left an hour and
    three hours on (all % of the cluster's cores), with the core-weighted median time left."""
    left = (tallies.left or {}).get(name, [])
    cap = tallies.capacity
    return {
        "held_at_last_start_pct": _round(still_running_pct(left, 0.0, cap)),
        "left_after_60_min_pct": _round(still_running_pct(left, 3600.0, cap)),
        "left_after_180_min_pct": _round(still_running_pct(left, 3 * 3600.0, cap)),
        "left_median_min": _round(_minutes(remaining_median(left))),
    }


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 60


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)
