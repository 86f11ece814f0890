"""Which waiting jobs ask reclaim in a pass: past those it could not help lately.

A queue's oldest waiting jobs are its hardest to place: the pass releases what fits, so what is
left at the head is what fits nowhere, often a pod asking whole GPUs that no victims can free.
Asking reclaim only for the first few jobs in queue order then asks for the same hard ones
pass after pass. On the full trace cluster (docs/queues.md), between 60 and 80 minutes after B
started, 248 of its 252 reclaim asks were for the same 8-GPU pods and none found victims, while
hundreds of B's pods asking one GPU or less waited behind them, never asked for.

The rule, one for the extender and the simulator:

* the queue's waiting jobs in its own order (the caller's: priority, then age);
* a job whose last ask found no victims **rests** for `rest_s`, then is asked again (what the
  other queues may give up changes as their pods end and start); a resting job is still asked
  when its queue has too few jobs awake to fill its asks, so a short queue is asked for exactly
  as before (a job may find no victims only because the others' pods are younger than the
  minimum runtime, and must not then wait a whole rest);
* at most `per_queue` asks per queue per pass, so the work per pass stays bounded.

So the asks move down a queue past the jobs reclaim cannot help, as kube-scheduler moves past
a pod that does not fit. Which job reclaim picks victims for, and whether it may, is still
`reclaim` and `reclaim_nodes`. Pure: the caller passes `now`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from vgpu.core.queues.release import Job

REST_S = 60.0
"""Seconds a job whose ask found no victims is not asked again."""


class ReclaimAsks:
    """The jobs resting after an ask that found no victims, kept from pass to pass."""

    def __init__(self, rest_s: float = REST_S) -> None:
        self.rest_s = rest_s
        self._rested: dict[str, float] = {}
        """Job key -> when its ask found no victims."""

    def choose(self, jobs: Iterable[Job], *, per_queue: int, now: float) -> Iterator[Job]:
        """The jobs to ask for: per queue, the first `per_queue` awake in the order given, then
        resting ones in that order while the queue's asks are not filled (module doc). Lazy:
        the caller may stop early (a queue reaching its share)."""
        asked: dict[str, int] = {}
        resting: dict[str, list[Job]] = {}
        for job in jobs:
            if asked.get(job.queue, 0) >= per_queue:
                continue
            if self.resting(job.key, now):
                spare = resting.setdefault(job.queue, [])
                if len(spare) < per_queue:
                    spare.append(job)
                continue
            asked[job.queue] = asked.get(job.queue, 0) + 1
            yield job
        for queue, spare in resting.items():
            yield from spare[: per_queue - asked.get(queue, 0)]

    def resting(self, key: str, now: float) -> bool:
        """Whether `key`'s last ask found no victims less than `rest_s` ago."""
        since = self._rested.get(key)
        return since is not None and now - since < self.rest_s

    def found_none(self, key: str, now: float) -> None:
        """`key`'s ask found no victims: it rests."""
        self._rested[key] = now

    def forget_rested(self, now: float) -> None:
        """Drop rests that are over: what is kept is bounded by the asks of one `rest_s`."""
        self._rested = {k: t for k, t in self._rested.items() if now - t < self.rest_s}
