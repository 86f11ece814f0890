"""Running many replays: policies × seeds, optionally in parallel processes.

Each job re-reads nothing: the trace is parsed once in the parent and shipped to workers as plain
dataclasses. Results come back in (policy, seed) order regardless of completion order.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from statistics import median
from typing import TextIO

from vgpu.core.model import PodRequest
from vgpu.core.policy.specs import PolicySpec, make_policy
from vgpu.core.workload import Workload, workload_from
from vgpu.sim.dra import chooser
from vgpu.sim.engine import RunResult, capacity_milli, replay
from vgpu.sim.gangs import replay_units
from vgpu.sim.trace import Trace
from vgpu.sim.variants import gangs, two_axis
from vgpu.sim.workload import arrivals


@dataclass(frozen=True, slots=True)
class Job:
    """One replay to run."""

    policy: PolicySpec
    seed: int
    tune: float
    ties: str = "policy"
    """How equal top scores are broken: "policy" (its own rule), "random" or "first" (node order)."""
    variant: str = "none"
    """A synthetic trace variant (`variants.VARIANTS`)."""
    prior: str = "auto"
    """What a policy that learns online is told in advance: "auto"/"none" (nothing), "trace"."""
    gang_mode: str = "auto"
    """How gangs are placed: "plan", "independent", or "auto" (plan for default policies)."""
    device_choice: str = "extender"
    """Who picks the GPUs on the chosen node (`vgpu.sim.dra.DEVICE_CHOICES`)."""


def _workload(trace_pods: tuple[PodRequest, ...], job: Job) -> Workload:
    # FGD's target workload comes from the trace as given (before inflation), as in the paper; a
    # policy that learns online starts from nothing unless asked, as in a live cluster.
    if job.policy.learns_online and job.prior != "trace":
        return Workload((), ())
    return workload_from(trace_pods)


def run_job(trace: Trace, job: Job) -> RunResult:
    """Build the arrival sequence and the policy for one job, and replay it."""
    source = two_axis(trace.pods, job.seed) if job.variant == "two-axis" else trace.pods
    pods = arrivals(
        source, capacity_milli=capacity_milli(trace.nodes), tune=job.tune, seed=job.seed
    )
    policy = make_policy(job.policy, _workload(source, job))
    if job.ties != "policy":
        policy.random_ties = job.ties == "random"
    if job.variant == "gangs":
        mode = job.gang_mode
        if mode == "auto":
            mode = "plan" if job.policy.plans_gangs else "independent"
        return replay_units(trace.nodes, gangs(pods, job.seed), policy, seed=job.seed, mode=mode)
    if job.device_choice == "extender":
        return replay(trace.nodes, pods, policy, seed=job.seed)
    result = replay(
        trace.nodes, pods, policy, seed=job.seed, device_choice=chooser(job.device_choice)
    )
    result.policy = f"{result.policy}/{job.device_choice}"
    return result


_TRACE: Trace | None = None


def _init_worker(trace: Trace) -> None:
    global _TRACE
    _TRACE = trace


def _run_in_worker(job: Job) -> RunResult:
    assert _TRACE is not None
    return run_job(_TRACE, job)


def run_all(
    trace: Trace,
    jobs: Sequence[Job],
    *,
    workers: int = 1,
    on_done: Callable[[RunResult, int, int], None] | None = None,
) -> list[RunResult]:
    """Run every job; `on_done(result, done, total)` reports progress."""
    results: dict[int, RunResult] = {}
    if workers <= 1 or len(jobs) <= 1:
        for i, job in enumerate(jobs):
            results[i] = run_job(trace, job)
            if on_done:
                on_done(results[i], len(results), len(jobs))
    else:
        with ProcessPoolExecutor(
            max_workers=min(workers, len(jobs)), initializer=_init_worker, initargs=(trace,)
        ) as pool:
            futures: dict[Future[RunResult], int] = {
                pool.submit(_run_in_worker, job): i for i, job in enumerate(jobs)
            }
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                if on_done:
                    on_done(results[i], len(results), len(jobs))
    return [results[i] for i in range(len(jobs))]


def default_workers() -> int:
    """Worker processes to use when --jobs is not given: the CPUs we may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def summary(results: Sequence[RunResult]) -> dict[str, dict[str, object]]:
    """The `--json` document's "policies" object."""
    out: dict[str, dict[str, object]] = {}
    for r in results:
        entry = out.setdefault(r.policy, {"median_alloc_pct_at_100": 0.0, "runs": []})
        runs = entry["runs"]
        assert isinstance(runs, list)
        runs.append(r.as_json())
    for name, entry in out.items():
        entry["median_alloc_pct_at_100"] = median_at_100(r for r in results if r.policy == name)
    return out


def median_at_100(results: Iterable[RunResult]) -> float | None:
    """The median allocation at 100 % arrival over runs that reached it (None if none did)."""
    values = [r.alloc_pct_at_100 for r in results if r.alloc_pct_at_100 is not None]
    return round(median(values), 2) if values else None


def figure(value: float | None) -> str:
    """A percentage with two decimals, or "n/a" where the figure does not exist."""
    return "n/a" if value is None else f"{value:.2f}"


def percent_or_na(value: float | None) -> str:
    """`95.23 %`, or `n/a` where the figure does not exist."""
    return "n/a" if value is None else f"{value:.2f} %"


def progress_printer(stream: TextIO | None = None) -> Callable[[RunResult, int, int], None]:
    """A progress callback writing one line per finished run."""

    def report(result: RunResult, done: int, total: int) -> None:
        print(
            f"[{done}/{total}] {result.policy} seed {result.seed}: "
            f"{percent_or_na(result.alloc_pct_at_100)} allocated at 100 % arrival "
            f"({result.seconds:.1f} s)",
            file=stream or sys.stderr,
            flush=True,
        )

    return report
