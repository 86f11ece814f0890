"""The victims on one node: the fewest, then the least GPU time lost, by a bounded search.

A single walk of a node's evictable jobs, youngest first, can miss a victim set that exists: it
may spend a victim queue's room (what the queue may give up and stay at or above what it deserves)
on a young pod on another GPU, and then may not take the older pods on the GPU the waiting pod
needs. On a real cluster a GPU held exactly three pods whose eviction was allowed and would have
freed it, and reclaim evicted nothing for minutes.

`cheapest` searches instead. The rules it keeps are those of `reclaim`: each victim's queue stays
at or above what it deserves after all the evictions of the set, checked on the set as a whole
(the rule is downward closed: a set that breaks it is cut with every set that contains it). The
search:

* asks first whether the job fits with **every** evictable job of the node gone: evicting more
  never makes a pod fit less, so when that fails no set on the node can help (one what-if);
* then tries sets by size, from the fewest whose units could cover the ask: the first size at
  which a set fits is the fewest evictions; among the sets of that size, the least GPU time lost
  (cores x time run) wins;
* builds the sets of a size from the GPUs they touch, fewest GPUs first (a pod runs on a few GPUs
  of its node, and the victims it needs are on those), and asks the what-if in that order, the
  least GPU time lost first among sets touching as many GPUs, and sets on more GPUs only while
  they would lose less than the best found (a victim holding several GPUs may lose less than
  one holding a single GPU); a set whose units, with what is free on the node, cannot cover the
  job's ask is not asked;
* is **bounded**: at most `SETS_SEEN` sets built and `FITS_ASKED` what-ifs per node. A search cut
  short says so (`Found.complete` is false), and the caller falls back to the walk.

Jobs whose GPUs are not known (`Running.gpus` empty) count as a GPU of their own. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from vgpu.core.queues.proportion import ZERO, Vec, add, fits_within, share, sub
from vgpu.core.queues.reclaim import Running
from vgpu.core.queues.release import Job

SETS_SEEN = 20_000
"""Victim sets built per node at most (those the rules or the units rule out included)."""
FITS_ASKED = 64
"""What-ifs asked per node at most (the first, every job gone, included)."""

FitsWithout = Callable[[Job, Sequence[Running]], bool]


@dataclass(frozen=True, slots=True)
class Found:
    """A node's search: the cheapest set found (None: none), and whether the search was whole."""

    victims: tuple[Running, ...] | None
    complete: bool


def lost(chosen: Sequence[Running], now: float) -> float:
    """GPU time the evictions throw away: cores x time run, summed."""
    return sum(r.ask[0] * (now - r.started) for r in chosen)


def cheapest(
    job: Job,
    jobs: Sequence[Running],
    held: Mapping[str, Vec],
    due: Mapping[str, Vec],
    fits_without: FitsWithout,
    *,
    free: Vec | None,
    now: float,
) -> Found:
    """The fewest of `jobs` (one node's evictable jobs) to evict so `job` fits, then the least
    GPU time lost (module doc). `held`, `due`: what each queue holds and deserves (a victim's
    queue keeps share >= 1); `free`: what is free on the node now (None: unknown, then no set
    is ruled out by units)."""
    search = _Search(job, jobs, (held, due), fits_without, free, now)
    if not jobs or not search.ask(tuple(jobs)):
        return Found(None, search.asked <= FITS_ASKED)
    for size in range(search.fewest(), len(jobs) + 1):
        best = search.best_of_size(size)
        if best is not None or not search.within_bounds():
            return Found(best, search.within_bounds())
    return Found(None, search.within_bounds())  # pragma: no cover - all jobs gone fits


class _Search:
    """One node's search and what it has spent."""

    def __init__(
        self,
        job: Job,
        jobs: Sequence[Running],
        books: tuple[Mapping[str, Vec], Mapping[str, Vec]],
        fits: FitsWithout,
        free: Vec | None,
        now: float,
    ) -> None:
        self.job, self.fits, self.free, self.now = job, fits, free, now
        self.held, self.due = books
        self.jobs = tuple(jobs)
        self.gpus = {r.key: frozenset(r.gpus or (f"job:{r.key}",)) for r in jobs}
        self.seen = self.asked = 0
        self.cut = False

    def within_bounds(self) -> bool:
        return not self.cut

    def ask(self, chosen: tuple[Running, ...]) -> bool:
        if self.asked >= FITS_ASKED:
            self.cut = True
            return False
        self.asked += 1
        return self.fits(self.job, chosen)

    def fewest(self) -> int:
        """A lower bound on the set's size: per dimension, the fewest jobs (the largest there
        first) whose units, with what is free, cover the ask there; the largest of those."""
        if self.free is None:
            return 1
        bound = 1
        for dim, need in enumerate(self.job.ask):
            room, count = self.free[dim], 0
            for have in sorted((r.ask[dim] for r in self.jobs), reverse=True):
                if room >= need:
                    break
                room, count = room + have, count + 1
            bound = max(bound, count)
        return bound

    def best_of_size(self, size: int) -> tuple[Running, ...] | None:
        """The set of `size` that fits and loses least, or None (or the best found when the
        search ran out).

        Batches (sets touching as many GPUs) come fewest GPUs first, and in a batch the sets
        are asked the least GPU time lost first, so a batch's first set that fits is its best.
        Later batches are still asked for sets that would lose less than the best so far: a
        victim holding several GPUs may lose less than one on a single GPU (the first batch
        that fitted used to win).
        """
        best: tuple[Running, ...] | None = None
        for batch in self._batches(size):
            for chosen in sorted(batch, key=lambda c: (lost(c, self.now), [r.key for r in c])):
                if best is not None and lost(chosen, self.now) >= lost(best, self.now):
                    break
                if self.ask(chosen):
                    best = chosen
                    break
                if self.cut:
                    return best
        return best

    def _batches(self, size: int) -> Iterator[list[tuple[Running, ...]]]:
        """The legal sets of `size`, in batches by how many GPUs they touch, fewest first."""
        devices = sorted({d for ds in self.gpus.values() for d in ds})
        for touched in range(1, min(len(devices), size * self._widest()) + 1):
            batch: list[tuple[Running, ...]] = []
            for where in combinations(devices, touched):
                self.seen += 1
                self.cut = self.cut or self.seen > SETS_SEEN
                if self.cut:
                    break
                batch += self._sets_on(frozenset(where), size)
            yield batch
            if self.cut:
                return

    def _widest(self) -> int:
        return max(len(ds) for ds in self.gpus.values())

    def _sets_on(self, where: frozenset[str], size: int) -> list[tuple[Running, ...]]:
        """The sets of `size` of jobs on `where` touching every GPU of it, within the rules."""
        pool = [r for r in self.jobs if self.gpus[r.key] <= where]
        out: list[tuple[Running, ...]] = []
        for chosen in combinations(pool, size):
            self.seen += 1
            if self.seen > SETS_SEEN:
                self.cut = True
                break
            if frozenset().union(*(self.gpus[r.key] for r in chosen)) != where:
                continue
            if self._legal(chosen) and self._covers(chosen):
                out.append(chosen)
        return out

    def _legal(self, chosen: tuple[Running, ...]) -> bool:
        """Every victim's queue at or above what it deserves after the whole set."""
        gone: dict[str, Vec] = {}
        for r in chosen:
            gone[r.queue] = add(gone.get(r.queue, ZERO), r.ask)
        return all(
            share(sub(self.held.get(q, ZERO), v), self.due.get(q, ZERO)) >= 1
            for q, v in gone.items()
        )

    def _covers(self, chosen: tuple[Running, ...]) -> bool:
        if self.free is None:
            return True
        room = self.free
        for r in chosen:
            room = add(room, r.ask)
        return fits_within(self.job.ask, room)
