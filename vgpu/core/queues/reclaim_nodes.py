"""Reclaim's victims chosen per node, for a waiting job that runs on one node (a pod).

`reclaim.victims` walks the running jobs of the whole cluster youngest first. On a large cluster
those victims are spread over many nodes, and a pod asking whole GPUs rarely fits on what they
leave: on the full trace cluster most asks walked every victim its queue may give up without the
pod fitting (docs/queues.md). A pod binds to one node, so only victims on that node can let it in.

`victims_on_one_node` asks per node instead, with the same rules (`reclaim.may_reclaim`,
`reclaim.Givers`: other queues only, past the minimum runtime, each victim's queue at or above
what it deserves after the evictions) and the same what-if (`fits_without`, the real placement):

* **candidate nodes**: those where what is free plus what eviction may free there covers the
  job's ask in units (a node short of that cannot take it whatever is evicted); the
  `nodes_tried` with the most first, so the work per ask is bounded on any cluster;
* **on each**, a bounded search over the node's evictable jobs (`reclaim_search.cheapest`): the
  fewest that let the job in within the rules, then the least GPU time lost. A search cut short
  by its bounds and empty-handed falls back to the walk: the node's jobs youngest first until the
  job fits, then every victim it fits without spared (`reclaim.needed`);
* **the choice**: the fewest evictions, then the least GPU time lost (cores x time run), then
  the node's name.

The whole-cluster walk is asked too when it could do better: when the best node needs more than
one eviction, or none fits but a node's walk skipped a job because its queue's room ran out (the
walk's greedy order can spend that room on jobs the pod does not need). For a pod, what that walk
returns after sparing lies on one node as well, so it is one more candidate; with no more candidate
nodes than `nodes_tried`, the choice never evicts more than the whole-cluster walk would.

Jobs spanning nodes (gangs) keep `reclaim.victims`. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from vgpu.core.queues.proportion import ZERO, QueueSpec, Vec, add, fits_within
from vgpu.core.queues.reclaim import Givers, Running, may_reclaim, needed, victims, youngest
from vgpu.core.queues.reclaim_search import cheapest, lost
from vgpu.core.queues.release import Job

NODES_TRIED = 16
"""Candidate nodes walked per ask, those where eviction may leave the most room first."""

FitsWithout = Callable[[Job, Sequence[Running]], bool]


def victims_on_one_node(
    job: Job,
    specs: Sequence[QueueSpec],
    held: Mapping[str, Vec],
    due: Mapping[str, Vec],
    running: Sequence[Running],
    fits_without: FitsWithout,
    *,
    now: float,
    min_runtime_s: float,
    free: Callable[[str], Vec] | None = None,
    nodes_tried: int = NODES_TRIED,
) -> tuple[Running, ...] | None:
    """The running jobs to evict, all on one node, so `job` fits there; None when reclaim may
    not or would not help (module doc). `free(node)`: what is free there now (None: unknown,
    then no node is ruled out by units)."""
    if not may_reclaim(job, specs, held, due):
        return None
    alone = Givers(due, held)
    by_node: dict[str, list[Running]] = {}
    for r in running:
        old = r.node and r.queue != job.queue and now - r.started >= min_runtime_s
        if old and alone.may_give(r):
            by_node.setdefault(r.node, []).append(r)
    best: tuple[Running, ...] | None = None
    room_ran_out = False
    for node in _candidates(job, by_node, free, nodes_tried):
        found = cheapest(
            job,
            by_node[node],
            held,
            due,
            fits_without,
            free=None if free is None else free(node),
            now=now,
        )
        got = found.victims
        if not found.complete and got is None:  # cut short: the walk, as before the search
            walk = _Walk(job, due, held, fits_without)
            got = walk.on(sorted(by_node[node], key=youngest))
            room_ran_out |= walk.room_ran_out
        if got is not None and (best is None or _cost(got, now) < _cost(best, now)):
            best = got
    if (best is None and room_ran_out) or (best is not None and len(best) > 1):
        whole = victims(
            job, specs, held, due, running, fits_without, now=now, min_runtime_s=min_runtime_s
        )
        if whole is not None and (best is None or _cost(whole, now) < _cost(best, now)):
            best = whole
    return best


def _candidates(
    job: Job,
    by_node: Mapping[str, list[Running]],
    free: Callable[[str], Vec] | None,
    nodes_tried: int,
) -> list[str]:
    """The nodes eviction could make room on, the most room first, at most `nodes_tried`."""
    room: dict[str, Vec] = {}
    for node, jobs in by_node.items():
        freed = ZERO
        for r in jobs:
            freed = add(freed, r.ask)
        if free is None:
            room[node] = freed
            continue
        room[node] = add(freed, free(node))
        if not fits_within(job.ask, room[node]):
            del room[node]
    ranked = sorted(room, key=lambda n: (-room[n][0], -room[n][1], n))
    return ranked[:nodes_tried]


class _Walk:
    """One node's jobs youngest first, each taken while its queue may give it up, until the job
    fits; notes whether a job was skipped because its queue's room ran out."""

    def __init__(
        self, job: Job, due: Mapping[str, Vec], held: Mapping[str, Vec], fits: FitsWithout
    ) -> None:
        self.job, self.fits = job, fits
        self.givers = Givers(due, held)
        self.room_ran_out = False

    def on(self, jobs: Sequence[Running]) -> tuple[Running, ...] | None:
        chosen: list[Running] = []
        for r in jobs:
            if not self.givers.may_give(r):
                self.room_ran_out = True
                continue
            self.givers.give(r)
            chosen.append(r)
            if self.fits(self.job, chosen):
                return needed(self.job, chosen, self.fits)
        return None


def _cost(chosen: Sequence[Running], now: float) -> tuple[int, float, str]:
    """Fewest evictions, then least GPU time lost, then the node's name (a stable choice)."""
    return (len(chosen), lost(chosen, now), chosen[0].node if chosen else "")
