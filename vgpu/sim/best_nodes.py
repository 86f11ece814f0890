"""`Scheduler.select` over the whole cluster, at the cost of what changed since it was last asked.

`Scheduler.select` looks at every node for every pod. A queued replay of the full trace cluster
(1,213 nodes) selects tens of pods per 10 s tick for hours of simulated time, and that loop over
every node, memo hits included, was half of its time. `BestNodes` keeps, per pod shape (the
scheduler's memo key, which also names the policy's generation), each node's evaluation and a heap
of the nodes that fit, best score first, then node order. Before each answer it re-evaluates only
the nodes the state's `ChangeFeed` names since that shape was last asked about, so a select costs
the nodes that changed, not the cluster.

The answer is `Scheduler.select`'s: the same learning (`observe` first), the same evaluations of
the same node states through the same memo, the top score with ties to the first node in order,
then the policy's `finish`. That holds for a policy whose evaluations may be memoised and whose
ties go to node order (`cacheable`, not `random_ties`); for any other, or when a score is not a
number (NaN orders differently in a heap than in `select`'s comparisons), it asks
`Scheduler.select` itself.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from vgpu.core.changes import ChangeFeed
from vgpu.core.ids import GpuUUID, NodeName
from vgpu.core.model import PodRequest
from vgpu.core.placement import assignment_for
from vgpu.core.policy.interface import Evaluation
from vgpu.core.scheduler import Scheduler, Selection
from vgpu.core.state import NodeState

_IDLE = object()
_FINGERPRINT = object()
_HOLES = object()
_MISSING = object()
RANKINGS_KEPT = 512
"""Shapes whose rankings are kept (least recently asked dropped first): each holds an entry per
node, and a shape asked about again after a while costs one look at every node, as before. The
full trace's queued replay asks about 222 shapes, 422 when one queue asks memory
(`--queue-memory`: 318 of its own); with 128 kept, every pass rebuilt most rankings."""


@dataclass(slots=True)
class _Ranking:
    """One shape's evaluation of every node, and a heap of (-score, position, stamp)."""

    seq: int
    evals: list[Evaluation | None]
    stamps: list[int]
    seen: list[object]
    """Each node's state when it was evaluated (`_fingerprint`)."""
    heap: list[tuple[float, int, int]] = field(default_factory=list)
    numeric: bool = True


class BestNodes:
    """The best node for a pod, as `scheduler.select(pod)` over all nodes would pick it."""

    def __init__(self, scheduler: Scheduler, feed: ChangeFeed) -> None:
        if scheduler.state.feed is not feed:
            raise ValueError("the feed must be the one the scheduler's state announces to")
        self.scheduler = scheduler
        self.feed = feed
        self._rankings: OrderedDict[int, _Ranking] = OrderedDict()
        self._nodes: list[NodeState] = []
        self._position: dict[str, int] = {}
        self._seq = feed.seq
        self._reset()

    def _reset(self) -> None:
        """Take the state's nodes afresh (a node came or went) and forget every ranking."""
        self._nodes = list(self.scheduler.state.nodes())
        self._position = {ns.name: i for i, ns in enumerate(self._nodes)}
        self._rankings.clear()

    def _same_nodes(self) -> None:
        """Start afresh if a node came or went since the last select (a changed name not known,
        or known no more), or the feed no longer reaches back that far."""
        state = self.scheduler.state
        changed = self.feed.since(self._seq)
        self._seq = self.feed.seq
        if changed is None or any(
            name not in self._position or not state.has_node(NodeName(name)) for name in changed
        ):
            self._reset()

    def select(self, pod: PodRequest) -> Selection | None:
        """The best node for the pod and its assignment there, or None if it fits nowhere."""
        scheduler = self.scheduler
        policy = scheduler.policy
        if not policy.cacheable or policy.random_ties:
            return scheduler.select(pod)
        policy.observe(pod)
        self._same_nodes()
        ranking = self._ranking(scheduler.memo_key(pod), pod)
        if not ranking.numeric:
            return scheduler.select(pod)
        pos = _top(ranking)
        if pos is None:
            return None
        ns, ev = self._nodes[pos], ranking.evals[pos]
        assert ev is not None  # only nodes that fit are on the heap
        choice = policy.finish(ns, pod, ev, scheduler.rng)
        return Selection(ns.name, ev.score, choice, assignment_for(ns, pod, choice))

    def in_holes(self, pod: PodRequest) -> Selection | None:
        """`scheduler.select(holes)`, where `holes` is `pod` refusing every idle GPU of the
        cluster (`whole_gpus.holes_only`, with each node's idle GPUs memoised while it is
        unchanged): the best node for `pod` among its holes.

        `holes` names a new set of GPUs whenever a GPU empties or fills, so its evaluations are
        never memoised and `select` evaluates every node afresh (on the full trace cluster with
        memory asks, more than half of the replay's time). A policy evaluates a node through the
        GPUs of that node the selector allows (`GpuSelector.allows`), so on a node with no idle
        GPU `holes` is evaluated as `pod`, which the ranking keeps, and on the others as `pod`
        refusing that node's idle GPUs, memoised while the node is unchanged
        (tests/sim/test_best_nodes_holes.py holds every policy to this). Ties and `finish` as in
        `select`."""
        scheduler = self.scheduler
        policy = scheduler.policy
        idle_gpus = frozenset[GpuUUID]().union(*map(_idle, scheduler.state.nodes()))
        sel = pod.selector
        holes = replace(pod, selector=replace(sel, exclude_uuids=sel.exclude_uuids | idle_gpus))
        if not policy.cacheable or policy.random_ties:
            return scheduler.select(holes)
        policy.observe(holes)
        self._same_nodes()
        key = scheduler.memo_key(pod)
        ranking = self._ranking(key, pod)
        best_score, best_pos = float("-inf"), -1
        best_ev: Evaluation | None = None
        for pos, ns in enumerate(self._nodes):
            idle = _idle(ns)
            ev = ranking.evals[pos] if not idle else _on_holes(scheduler, ns, pod, idle, key)
            if ev is None:
                continue
            if ev.score > best_score:
                best_score, best_pos, best_ev = ev.score, pos, ev
        if best_ev is None:
            return None
        ns = self._nodes[best_pos]
        choice = policy.finish(ns, holes, best_ev, scheduler.rng)
        return Selection(ns.name, best_ev.score, choice, assignment_for(ns, holes, choice))

    def _ranking(self, key: int, pod: PodRequest) -> _Ranking:
        """The shape's ranking, brought up to date with the nodes changed since last asked."""
        ranking = self._rankings.get(key)
        changed = None if ranking is None else self.feed.since(ranking.seq)
        if ranking is None or changed is None:
            ranking = self._build(key, pod)
        else:
            self._rankings.move_to_end(key)
            ranking.seq = self.feed.seq
            for pos in sorted(self._position[name] for name in changed):
                self._refresh(ranking, pos, pod, key)
            if len(ranking.heap) > 2 * len(self._nodes) + 64:
                _compact(ranking)
        return ranking

    def _build(self, key: int, pod: PodRequest) -> _Ranking:
        n = len(self._nodes)
        ranking = _Ranking(self.feed.seq, [None] * n, [0] * n, [None] * n)
        for pos in range(n):
            self._refresh(ranking, pos, pod, key)
        self._rankings[key] = ranking
        self._rankings.move_to_end(key)
        while len(self._rankings) > RANKINGS_KEPT:
            self._rankings.popitem(last=False)
        return ranking

    def _refresh(self, ranking: _Ranking, pos: int, pod: PodRequest, key: int) -> None:
        """Evaluate one node (through the scheduler's per-node memo) and queue it if it fits."""
        state = self.scheduler.state
        ns = self._nodes[pos]
        if state.node(ns.name) is not ns:  # replaced inventory: the same name, a new state
            ns = self._nodes[pos] = state.node(ns.name)
        seen = _fingerprint(ns)
        if ranking.seen[pos] == seen:
            return  # touched and put back (a what-if and its revert): the same evaluation
        ranking.seen[pos] = seen
        ev = self.scheduler.evaluate(ns, pod, key=key)
        ranking.evals[pos] = ev
        ranking.stamps[pos] += 1
        if ev is not None:
            score = ev.score
            if score != score:
                ranking.numeric = False
            heapq.heappush(ranking.heap, (-score, pos, ranking.stamps[pos]))


def _fingerprint(ns: NodeState) -> object:
    """The node's state object (a replaced inventory is a new one) and everything about it that a
    charge or refund changes (`ClusterState`): while it is equal, an evaluation made then holds."""
    hit = ns.cache.get(_FINGERPRINT)
    if hit is None:  # one per node state, shared by every shape's ranking
        hit = ns.cache[_FINGERPRINT] = _state_of(ns)
    return hit


def _state_of(ns: NodeState) -> object:
    return (
        ns,
        ns.cpu_free,
        ns.mem_free,
        tuple(ns.free_cores),
        tuple(ns.free_mem),
        frozenset(ns.kinds.items()),
    )


def _idle(ns: NodeState) -> frozenset[GpuUUID]:
    """The node's idle GPUs (no core and no memory held), memoised while it is unchanged."""
    hit = ns.cache.get(_IDLE)
    if hit is None:
        hit = ns.cache[_IDLE] = frozenset(
            g.uuid for p, g in enumerate(ns.gpus) if ns.is_idle_gpu(p)
        )
    return hit  # type: ignore[return-value]


def _on_holes(
    scheduler: Scheduler, ns: NodeState, pod: PodRequest, idle: frozenset[GpuUUID], key: int
) -> Evaluation | None:
    """The node's evaluation of `pod` refusing the node's idle GPUs, memoised while the node is
    unchanged (under the shape's memo key, which names the policy's generation)."""
    memo = (_HOLES, key)
    hit = ns.cache.get(memo, _MISSING)
    if hit is _MISSING:
        sel = pod.selector
        refusing = replace(pod, selector=replace(sel, exclude_uuids=sel.exclude_uuids | idle))
        # The policy itself, not `scheduler.evaluate`: that would key each node's refusing
        # shape in the scheduler's table of shapes, whose fill starts every key (and ranking)
        # anew.
        hit = ns.cache[memo] = scheduler.policy.evaluate(ns, refusing, scheduler.rng)
    return hit  # type: ignore[return-value]


def _top(ranking: _Ranking) -> int | None:
    """The position of the best node (highest score, then first in order), dropping stale
    entries (a node re-evaluated since it was queued)."""
    heap, stamps = ranking.heap, ranking.stamps
    while heap:
        _, pos, stamp = heap[0]
        if stamp == stamps[pos]:
            return pos
        heapq.heappop(heap)
    return None


def _compact(ranking: _Ranking) -> None:
    """Rebuild the heap from the current evaluations (stale entries piled up)."""
    ranking.heap = [
        (-ev.score, pos, ranking.stamps[pos])
        for pos, ev in enumerate(ranking.evals)
        if ev is not None
    ]
    heapq.heapify(ranking.heap)
