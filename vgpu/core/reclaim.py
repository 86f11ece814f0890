"""Taking back from queues over their share, only when it lets a waiting job in.

Reclaim is opt-in per queue. For a waiting job of such a queue, `victims` picks running jobs of
other queues, youngest first among those past `min_runtime_s`, until `fits_without(job, victims)`
(the caller's what-if: the job placed whole on real GPUs with the victims gone) says it fits. It
never evicts on units alone (kube-batch and its heirs count quota, not GPUs, and may evict for a
job that still fits nowhere), and only when:

* the reclaiming queue stays within what it deserves after admission;
* every victim's queue stays at or above what it deserves after the eviction (dominant share >= 1);
* no ping-pong: the reclaimer's share after admission is at most the victim queue's after eviction,
  so the victim's queue could not reclaim the same capacity straight back.

Youngest first over the whole cluster may pick victims on GPUs the job will never use (a young pod
on another node). Once the job fits, each victim, oldest of them first, is spared again when the job
still fits without it, so every eviction returned is one the job needs.

Evictions go through the Eviction API (the adapter), so PodDisruptionBudgets hold. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from vgpu.core.queues import ZERO, QueueSpec, Vec, add, fits_within, share, sub
from vgpu.core.release import Job


@dataclass(frozen=True, slots=True)
class Running:
    """A released job holding GPUs: what eviction would give back."""

    key: str
    queue: str
    ask: Vec
    started: float


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
    spec = next((s for s in specs if s.name == job.queue), None)
    if spec is None or not spec.reclaim:
        return None
    mine_after = add(held.get(job.queue, ZERO), job.ask)
    if not fits_within(mine_after, due.get(job.queue, ZERO)):
        return None
    mine = share(mine_after, due.get(job.queue, ZERO))
    after = dict(held)
    chosen: list[Running] = []
    for r in sorted(_eligible(job, due, after, running, mine, now, min_runtime_s), key=_youngest):
        left = sub(after.get(r.queue, ZERO), r.ask)
        victim_share = share(left, due.get(r.queue, ZERO))
        if victim_share < 1 or mine > victim_share:
            continue
        after[r.queue] = left
        chosen.append(r)
        if fits_without(job, chosen):
            return _needed(job, chosen, fits_without)
    return None


def _youngest(r: Running) -> tuple[float, str]:
    return (-r.started, r.key)


def _eligible(
    job: Job,
    due: Mapping[str, Vec],
    held: Mapping[str, Vec],
    running: Sequence[Running],
    mine: Fraction,
    now: float,
    min_runtime_s: float,
) -> list[Running]:
    """The running jobs of other queues, past `min_runtime_s`, whose queue may give them up now:
    at or above deserved after, and no ping-pong.

    A victim's queue only loses what is chosen, and a queue's share only falls as it holds less,
    so a job its queue may not give up now it may not give up later in the same call either:
    dropping those before the sort changes no choice and spares sorting and scoring every running
    job of a queue already at its share. The test depends only on the queue and the ask, so it is
    made once per pair.
    """
    allowed: dict[tuple[str, Vec], bool] = {}
    out = []
    for r in running:
        if r.queue == job.queue or now - r.started < min_runtime_s:
            continue
        verdict = allowed.get((r.queue, r.ask))
        if verdict is None:
            left = share(sub(held.get(r.queue, ZERO), r.ask), due.get(r.queue, ZERO))
            verdict = allowed[(r.queue, r.ask)] = left >= 1 and mine <= left
        if verdict:
            out.append(r)
    return out


def _needed(
    job: Job, chosen: list[Running], fits_without: Callable[[Job, Sequence[Running]], bool]
) -> tuple[Running, ...]:
    """`chosen` less every victim the job fits without, trying the oldest first."""
    kept = list(chosen)
    for r in reversed(chosen):
        fewer = [k for k in kept if k is not r]
        if fewer and fits_without(job, fewer):
            kept = fewer
    return tuple(kept)
