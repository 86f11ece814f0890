"""Taking back from queues over their share, only when it lets a waiting job in.

Reclaim is opt-in per queue. For a waiting job of such a queue, `victims` picks running jobs of
other queues, youngest first among those past `min_runtime_s`, until `fits_without(job, victims)`
(the caller's what-if: the job placed whole on real GPUs with the victims gone) says it fits. It
never evicts on units alone (kube-batch and its heirs count quota, not GPUs, and may evict for a
job that still fits nowhere), and only when:

* the reclaiming queue stays within what it deserves after admission;
* every victim's queue stays at or above what it deserves after the eviction (dominant share >= 1).

So there is no ping-pong: the reclaimer's share after admission is at most 1 and the victim
queue's after eviction at least 1, so the victim's queue could not reclaim the capacity straight
back (no separate comparison is needed: the two conditions imply it).

Youngest first over the whole cluster may pick victims on GPUs the job will never use (a young pod
on another node). Once the job fits, each victim, oldest of them first, is spared again when the job
still fits without it, so every eviction returned is one the job needs.

Evictions go through the Eviction API (the adapter), so PodDisruptionBudgets hold. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vgpu.core.queues.proportion import ZERO, QueueSpec, Vec, add, fits_within, share, sub
from vgpu.core.queues.release import Job


@dataclass(frozen=True, slots=True)
class Running:
    """A released job holding GPUs: what eviction would give back."""

    key: str
    queue: str
    ask: Vec
    started: float
    node: str = ""
    """Where it runs ("" when unknown): victims chosen per node (`reclaim_nodes`) need it."""
    gpus: tuple[str, ...] = ()
    """The GPUs it holds on its node (empty when unknown): the search per node tries victims
    on few GPUs first (`reclaim_search`)."""


def victims(
    job: Job,
    specs: Sequence[QueueSpec],
    held: Mapping[str, Vec],
    due: Mapping[str, Vec],
    running: Sequence[Running],
    fits_without: Callable[[Job, Sequence[Running]], bool],
    *,
    now: float,
    min_runtime_s: float,
) -> tuple[Running, ...] | None:
    """The running jobs to evict so `job` fits, or None when reclaim may not or would not help."""
    if not may_reclaim(job, specs, held, due):
        return None
    givers = Givers(due, held)
    old_enough = [r for r in running if r.queue != job.queue and now - r.started >= min_runtime_s]
    chosen: list[Running] = []
    # A queue only loses what is chosen, and its share only falls as it holds less, so a job its
    # queue may not give up now it may not give up later in this call: those are dropped before
    # the sort, which spares sorting every running job of a queue already at its share.
    for r in sorted((r for r in old_enough if givers.may_give(r)), key=youngest):
        if not givers.may_give(r):
            continue
        givers.give(r)
        chosen.append(r)
        if fits_without(job, chosen):
            return needed(job, chosen, fits_without)
    return None


def may_reclaim(
    job: Job, specs: Sequence[QueueSpec], held: Mapping[str, Vec], due: Mapping[str, Vec]
) -> bool:
    """Whether the job's queue reclaims and stays within what it deserves after admission."""
    spec = next((s for s in specs if s.name == job.queue), None)
    if spec is None or not spec.reclaim:
        return False
    return fits_within(add(held.get(job.queue, ZERO), job.ask), due.get(job.queue, ZERO))


def youngest(r: Running) -> tuple[float, str]:
    """Sort key: the latest started first (the least work lost), then by key."""
    return (-r.started, r.key)


class Givers:
    """What each queue would hold after the evictions chosen so far, and whether it may give up
    a job more: it stays at or above deserved (with the reclaimer within its own, that rules
    out ping-pong).

    The answer depends only on the job's queue and ask, and changes only when that queue gives
    a job up: it is kept per (queue, ask) until then, so a scan over thousands of running jobs
    computes a share per distinct ask, not per job.
    """

    def __init__(self, due: Mapping[str, Vec], held: Mapping[str, Vec]) -> None:
        self.due = due
        self.after = dict(held)
        self._verdicts: dict[tuple[str, Vec], bool] = {}

    def may_give(self, r: Running) -> bool:
        verdict = self._verdicts.get((r.queue, r.ask))
        if verdict is None:
            left = share(sub(self.after.get(r.queue, ZERO), r.ask), self.due.get(r.queue, ZERO))
            verdict = self._verdicts[(r.queue, r.ask)] = left >= 1
        return verdict

    def give(self, r: Running) -> None:
        self.after[r.queue] = sub(self.after.get(r.queue, ZERO), r.ask)
        self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] != r.queue}


def needed(
    job: Job, chosen: list[Running], fits_without: Callable[[Job, Sequence[Running]], bool]
) -> tuple[Running, ...]:
    """`chosen` less every victim the job fits without, trying the oldest first."""
    kept = list(chosen)
    for r in reversed(chosen):
        fewer = [k for k in kept if k is not r]
        if fewer and fits_without(job, fewer):
            kept = fewer
    return tuple(kept)
