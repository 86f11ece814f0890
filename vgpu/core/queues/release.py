"""Which held jobs to release now, in fair order, and only where they fit.

Queued pods wait behind a scheduling gate; each pass of the extender's leader (and each step of the
simulator) asks `plan` which jobs to let go. A **job** is one pod or a whole gang: it is released
whole or not at all. The order:

1. queues by proportion: those below what they deserve first (lowest share first, `queues.share`),
   then, when the pass is **work-conserving**, queues at or over their share take what is left;
2. inside a queue: priority, then DRF over **namespaces** (the namespace holding the smallest
   dominant share of the cluster first), then age. Namespaces rather than jobs: a job is released
   whole, so every pending job holds nothing yet and job-level DRF would be a tie that falls back to
   arrival order (see kube-batch's drf plugin); a namespace's share says which team has had least;
3. **fit-aware**: a job is released only when `fits(job, keep)` places it whole on real GPUs now;
   that callback also holds the place (the caller's ledger), so what is released can bind. `keep`
   names the queues below their share still waiting for whole GPUs in the pass (a job of them
   with `whole` not released yet), for which the placement keeps idle GPUs (`whole_gpus`).

**What reclaim freed goes to the job it was freed for.** The caller names the jobs reclaim evicted
for (`first`, kept until they are released or the caller gives up on them): each is tried before
every other job of every queue, so the GPUs its victims give back are not taken by another queue,
or by an older job of its own queue that fits them partly, in the pass that sees them free.

**Strict holds** (the fragmentation case: a queue of large shares starving behind small ones). A
strict queue **waits** in a pass when a job of it, any job and not only the first tried, does not
fit while the queue is below its deserved share (`queues.overused`). The hold starts when the queue
first waits and is carried from pass to pass (and across failovers, by the caller) until a pass in
which it does not wait. For `strict_s` from that start the hold is **in force**: when a job of the
queue does not fit the pass stops, so nothing takes the room the queue waits for. A strict queue
below its share whose hold is not spent is served before every other queue, so it finds out
whether it waits before another queue takes that room. Once the time is spent the start is kept (the hold does not
start again while the queue still waits) and passes are work-conserving.

A hold is **spent** when it ends below its queue's share (a pass in which the queue does not
wait: its jobs fit or went away): it stopped holding the others back at its end or when its time
ran out, whichever came first, and for `strict_s` from then (the **cooldown**, `Pass.spent`,
carried like the holds) the queue starts no other hold and is not served first. A hold that
ends because its queue reached its share is not spent: the queue got what it held for, and a
strict queue with a backlog of large jobs holds again as soon as it falls below its share. Otherwise a
tenant could delete the job that waits for one pass and submit it again, and the fresh hold
would hold every other queue back again: with the cooldown, each hold holds the others for at
most `strict_s` and is followed by at least `strict_s` in which the queue holds nobody. A job
that could not fit even on an empty cluster (more than its capacity; more than the queue's cap
never gets this far) neither starts a hold nor keeps one: nothing the others give up lets it in.
Pure: no I/O, no clock (the caller passes `now`).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from vgpu.core.queues.proportion import (
    ZERO,
    QueueSpec,
    Vec,
    add,
    cap_text,
    deserved,
    fits_within,
    overused,
    share,
)
from vgpu.core.queues.whole_gpus import Keep


@dataclass(frozen=True, slots=True)
class Job:
    """One pod, or a gang released whole; `ask` is the sum of its members' units."""

    key: str
    queue: str
    namespace: str
    ask: Vec
    priority: int = 0
    created: float = 0.0
    whole: bool = False
    """Every GPU it asks is a whole one: while it waits below its queue's share, small pods go
    to holes first (`whole_gpus.Keep`)."""


@dataclass(frozen=True, slots=True)
class Book:
    """What is bound or released already: per queue and per namespace, and the cluster's size.

    `backlog` is what each queue's pending jobs that are *not* offered to this pass ask (a caller
    that offers only the oldest jobs of a long queue): it counts towards what the queue requests,
    so its deserved share is the same as if every job were offered.
    """

    capacity: Vec
    by_queue: Mapping[str, Vec] = field(default_factory=dict)
    by_namespace: Mapping[str, Vec] = field(default_factory=dict)
    backlog: Mapping[str, Vec] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Pass:
    """A pass's outcome: released job keys in order, why the others wait, strict holds running,
    and the strict queues cooling down after a spent hold (queue to when the hold stopped
    holding the others back; the caller passes it to the next pass as `spent`)."""

    released: tuple[str, ...]
    waiting: Mapping[str, str]
    held_since: Mapping[str, float]
    deserved: Mapping[str, Vec]
    spent: Mapping[str, float] = field(default_factory=dict)


def dominant(held: Vec, capacity: Vec) -> Fraction:
    """DRF's dominant share of `held` in a cluster of `capacity`."""
    return max(
        (Fraction(h, c) for h, c in zip(held, capacity, strict=True) if c > 0), default=Fraction(0)
    )


class _Pending:
    """The jobs of one queue, picked by priority, namespace DRF share, then age; a job reclaim
    made room for (`first`) before them all.

    A pass may offer thousands of jobs; each pick looks only at the namespaces' heads, whose
    dominant shares the caller keeps (`ns_share`), so a pick costs the namespaces, not the jobs.
    """

    def __init__(self, jobs: Sequence[Job], first: Collection[str] = ()) -> None:
        self._by_ns: dict[str, deque[Job]] = {}
        self._first = deque(sorted((j for j in jobs if j.key in first), key=_age))
        for job in sorted((j for j in jobs if j.key not in first), key=_age):
            self._by_ns.setdefault(job.namespace, deque()).append(job)
        self._left = len(jobs)

    def __bool__(self) -> bool:
        return self._left > 0

    def reclaimed_for(self) -> bool:
        """Whether a job reclaim made room for is still to be tried."""
        return bool(self._first)

    def take(self, ns_share: Callable[[str], Fraction]) -> Job:
        """The next job (taken off the queue)."""
        if self._first:
            self._left -= 1
            return self._first.popleft()
        heads = [jobs[0] for jobs in self._by_ns.values() if jobs]
        job = min(heads, key=lambda j: (-j.priority, ns_share(j.namespace), j.created, j.key))
        self._by_ns[job.namespace].popleft()
        self._left -= 1
        return job

    def remaining(self) -> list[Job]:
        return [*self._first, *(job for jobs in self._by_ns.values() for job in jobs)]


def _age(job: Job) -> tuple[int, float, str]:
    """Priority, then age: a queue's own order before namespace shares are known."""
    return (-job.priority, job.created, job.key)


def _requests(book: Book, jobs: Sequence[Job]) -> dict[str, Vec]:
    asked = dict(book.by_queue)
    for name, more in book.backlog.items():
        asked[name] = add(asked.get(name, ZERO), more)
    for job in jobs:
        asked[job.queue] = add(asked.get(job.queue, ZERO), job.ask)
    return asked


def plan(
    specs: Sequence[QueueSpec],
    book: Book,
    jobs: Sequence[Job],
    fits: Callable[[Job, Keep], bool],
    *,
    now: float,
    held_since: Mapping[str, float] | None = None,
    work_conserving: bool = True,
    first: Collection[str] = (),
    spent: Mapping[str, float] | None = None,
) -> Pass:
    """Release what fits, fairest first; `fits` places a job whole and holds it, or says no,
    keeping idle GPUs for the queues its `Keep` names (`whole_gpus`). `first`: the jobs reclaim
    evicted for, tried before every other job; `spent`: the last pass's `Pass.spent`, the
    strict queues cooling down after a hold (module doc)."""
    by_name = {s.name: s for s in specs}
    jobs = [j for j in jobs if j.queue in by_name]
    due = deserved(book.capacity, specs, _requests(book, jobs))
    held = dict(book.by_queue)
    ns_held = dict(book.by_namespace)
    pending = {q: _Pending([j for j in jobs if j.queue == q], first) for q in by_name}
    holds = {q: t for q, t in (held_since or {}).items() if q in by_name}
    cooling = {
        q: t
        for q, t in (spent or {}).items()
        if q in by_name and q not in holds and _in_force(t, by_name[q].strict_s, now)
    }
    released: list[str] = []
    waiting: dict[str, str] = {}
    waited: set[str] = set()  # strict queues with a job that did not fit below their share
    cut_short = False
    whole_left = Counter(j.queue for j in jobs if j.whole)

    kept: list[Keep] = []  # the current `keep()`, until a job is released or skipped

    def keep() -> Keep:
        if not kept:
            kept.append(
                Keep(
                    frozenset(
                        q
                        for q, n in whole_left.items()
                        if n and not overused(held.get(q, ZERO), due[q])
                    )
                )
            )
        return kept[0]

    # Queue order and namespace shares change only when a job is released: kept, not recomputed
    # for each of the pass's (possibly thousands of) jobs.
    order: dict[str, tuple[bool, bool, bool, Fraction, str]] = {}
    ns_share: dict[str, Fraction] = {}

    def rank(q: str) -> tuple[bool, bool, bool, Fraction, str]:
        if q not in order:
            over = overused(held.get(q, ZERO), due[q])
            holding = (
                not over and q not in cooling and _unspent(holds.get(q), by_name[q].strict_s, now)
            )
            reclaimed = pending[q].reclaimed_for()
            order[q] = (not reclaimed, not holding, over, share(held.get(q, ZERO), due[q]), q)
        return order[q]

    def dominance(ns: str) -> Fraction:
        if ns not in ns_share:
            ns_share[ns] = dominant(ns_held.get(ns, ZERO), book.capacity)
        return ns_share[ns]

    while True:
        live = sorted((q for q, p in pending.items() if p), key=rank)
        if not work_conserving:
            live = [q for q in live if not rank(q)[2]]
        if not live:
            break
        q = live[0]
        if pending[q].reclaimed_for():
            order.pop(q, None)  # its rank changes once its reclaimed-for jobs are tried
        job = pending[q].take(dominance)
        spec = by_name[q]
        if spec.cap is not None and not fits_within(add(held.get(q, ZERO), job.ask), spec.cap):
            waiting[job.key] = f"queue {q} is at its cap of {cap_text(spec.cap)}"
            whole_left[q] -= job.whole  # it waits for its cap, not for idle GPUs
            kept.clear()
            continue
        if fits(job, keep()):
            whole_left[q] -= job.whole
            kept.clear()
            released.append(job.key)
            held[q] = add(held.get(q, ZERO), job.ask)
            ns_held[job.namespace] = add(ns_held.get(job.namespace, ZERO), job.ask)
            order.pop(q, None)
            ns_share.pop(job.namespace, None)
            continue
        waiting[job.key] = "does not fit whole on any GPU now"
        if _may_hold(spec, job, book.capacity, q in holds or q not in cooling) and not overused(
            held.get(q, ZERO), due[q]
        ):
            waited.add(q)
            if _in_force(holds.setdefault(q, now), spec.strict_s, now):
                _wait_all(pending, waiting, strict_reason(spec))
                cut_short = True
                break
    kept_holds = _kept(holds, waited, cut_short, pending)
    ended = {  # a hold that ended at its queue's share is not spent: nobody waited for nothing
        q: min(now, since + by_name[q].strict_s)
        for q, since in holds.items()
        if not overused(held.get(q, ZERO), due[q])
    }
    cooled = {
        q: t
        for q, t in {**cooling, **ended}.items()
        if q not in kept_holds and _in_force(t, by_name[q].strict_s, now)
    }
    return Pass(tuple(released), waiting, kept_holds, due, cooled)


def _may_hold(spec: QueueSpec, job: Job, capacity: Vec, free_to: bool) -> bool:
    """Whether `job`, not fitting now, makes its queue wait (start or keep a hold): a strict
    queue not cooling down after a spent hold (`free_to`), and a job that would fit the empty
    cluster (one more than its capacity never fits, whatever the others give up)."""
    return spec.strict_s > 0 and free_to and fits_within(job.ask, capacity)


def _in_force(since: float | None, strict_s: float, now: float) -> bool:
    """Whether a hold started at `since` still holds the others back at `now`."""
    return since is not None and now - since < strict_s


def _unspent(since: float | None, strict_s: float, now: float) -> bool:
    """Whether a strict queue below its share is served first: its hold is not spent (not started
    yet, or in force), so that it finds out whether it waits before another queue takes the room."""
    return strict_s > 0 and (since is None or _in_force(since, strict_s, now))


def _kept(
    holds: Mapping[str, float], waited: set[str], cut_short: bool, pending: Mapping[str, _Pending]
) -> dict[str, float]:
    """The holds that go on to the next pass: those of queues that waited in this one. A pass cut
    short by a hold did not try every queue: a queue it did not reach keeps its hold while it has
    jobs left (whether it still waits is for the next pass to see)."""
    return {
        q: since
        for q, since in holds.items()
        if q in waited or (cut_short and q in pending and bool(pending[q]))
    }


def strict_reason(spec: QueueSpec) -> str:
    """Why the jobs a strict hold holds back wait: one line per queue, the same every pass the
    hold lasts, so it is told once (Events follow changes in state, not which job was tried)."""
    return (
        f"held for strict queue {spec.name}: below its deserved share, a job of it does not fit "
        f"whole on any GPU now (the others wait at most {spec.strict_s:g} s)"
    )


def _wait_all(pending: Mapping[str, _Pending], waiting: dict[str, str], why: str) -> None:
    for jobs in pending.values():
        for job in jobs.remaining():
            waiting.setdefault(job.key, why)
