"""The scheduling façade used by the extender and the simulator alike.

* `filter` answers "which of these nodes can host the pod, and why not the others" (verdicts).
* `select` picks the best node (with the policy's tie-break) and the assignment there (the
  simulator, gang planning).
* `place` gives the assignment on a node someone else chose (the extender: kube-scheduler picks
  the node), or a `Verdict`; `core.given_node.place` adds invariant I and init-container reuse.

Both reach the GPUs by one path: the policy's evaluation of the node, then its `finish` (where a
random policy draws its GPU), then the ledger `Assignment`; so for the same state and pod they
take the same GPUs on the same node.

Policy evaluations are memoised per node until that node changes (`NodeState.cache`), which is
what makes a 10,000-pod replay over 1,200 nodes take seconds instead of minutes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import count
from random import Random
from weakref import WeakKeyDictionary

from vgpu.core.fit import Verdict, check
from vgpu.core.ids import NodeName
from vgpu.core.model import Assignment, PodRequest
from vgpu.core.placement import Choice, assignment_for
from vgpu.core.policy.interface import Evaluation, Policy
from vgpu.core.state import ClusterState, NodeState

_MISSING = object()
_KEYS: WeakKeyDictionary[Policy, dict[tuple[int, object], int]] = WeakKeyDictionary()
_SERIAL = count()
SHAPES_KEPT = 4096
"""Pod shapes keyed per policy before the keys start anew (each shape is a new key: without a
bound the table grew with every pod of a new shape)."""
NODE_MEMO_KEPT = 1024
"""Evaluations a node keeps while it is unchanged; a node nobody places on would otherwise keep
one per pod shape ever asked about."""
MAX_EXTENDER_SCORE = 10


def scale_score(score: float | None, bounds: tuple[float, float] | None) -> int:
    """A raw score min-max scaled to kube-scheduler's 0..10 over `bounds` (lowest, highest raw
    score among the nodes asked about); 0 for a node that does not fit (None)."""
    if score is None or bounds is None:
        return 0
    lo, hi = bounds
    return MAX_EXTENDER_SCORE if hi == lo else round(MAX_EXTENDER_SCORE * (score - lo) / (hi - lo))


@dataclass(frozen=True, slots=True)
class Selection:
    """The chosen node, its score, the GPU choice there (positions) and its assignment."""

    node: NodeName
    score: float
    choice: Choice
    assignment: Assignment


def _remember(ns: NodeState, key: int, value: object) -> object:
    """Keep an evaluation in the node's memo, emptied first when it holds `NODE_MEMO_KEPT`."""
    if len(ns.cache) >= NODE_MEMO_KEPT:
        ns.cache.clear()
    ns.cache[key] = value
    return value


class Scheduler:
    """Filter, score and select over a `ClusterState` with one policy."""

    def __init__(self, state: ClusterState, policy: Policy, *, rng: Random | None = None) -> None:
        self.state = state
        self.policy = policy
        self.rng = rng if rng is not None else Random(0)

    def _key(self, pol: Policy, pod: PodRequest) -> int:
        """A small int standing for (policy, its generation, pod shape): cheap to hash in the hot
        loop, and unique across schedulers and policies, since node caches are shared by all."""
        keys = _KEYS.get(pol)
        if keys is None:
            keys = _KEYS[pol] = {}
        full = (pol.generation, pod.shape)
        key = keys.get(full)
        if key is None:
            if len(keys) >= SHAPES_KEPT:
                keys.clear()  # old keys only miss in node memos, themselves bounded
            key = keys[full] = next(_SERIAL)
        return key

    def memo_key(self, pod: PodRequest) -> int:
        """The key this scheduler's evaluations of `pod` are memoised under: one per policy
        generation and pod shape (a view that keeps evaluations per shape keys them by it)."""
        return self._key(self.policy, pod)

    def evaluate(
        self,
        ns: NodeState,
        pod: PodRequest,
        policy: Policy | None = None,
        *,
        key: int | None = None,
    ) -> Evaluation | None:
        """The policy's evaluation of one node, memoised while the node is unchanged. A caller
        evaluating many nodes for one pod with this scheduler's policy may pass `memo_key(pod)`
        as `key`, computed once."""
        pol = policy or self.policy
        if not pol.cacheable:
            return pol.evaluate(ns, pod, self.rng)
        if key is None or pol is not self.policy:
            key = self._key(pol, pod)
        hit = ns.cache.get(key, _MISSING)
        if hit is _MISSING:
            hit = _remember(ns, key, pol.evaluate(ns, pod, self.rng))
        return hit  # type: ignore[return-value]

    def _nodes(self, names: Iterable[NodeName] | None) -> Iterable[NodeState]:
        if names is None:
            return self.state.nodes()
        return (self.state.node(n) for n in names if self.state.has_node(n))

    def filter(self, pod: PodRequest, names: Iterable[NodeName]) -> dict[NodeName, Verdict]:
        """A verdict per known node name (unknown names are the caller's to report)."""
        return {ns.name: check(ns, pod) for ns in self._nodes(names)}

    def select(
        self, pod: PodRequest, names: Iterable[NodeName] | None = None, policy: Policy | None = None
    ) -> Selection | None:
        """The best node for the pod, or None if it fits nowhere."""
        pol = policy or self.policy
        pol.observe(pod)
        best_score = float("-inf")
        best: list[tuple[NodeState, Evaluation]] = []
        cacheable, rng, evaluate = pol.cacheable, self.rng, pol.evaluate
        key = self._key(pol, pod) if cacheable else -1
        for ns in self._nodes(names):
            # `self.evaluate`, inlined: this loop runs nodes × pods times in a replay.
            if cacheable:
                ev = ns.cache.get(key, _MISSING)
                if ev is _MISSING:
                    ev = _remember(ns, key, evaluate(ns, pod, rng))
            else:
                ev = evaluate(ns, pod, rng)
            if ev is None:
                continue
            score = ev.score  # type: ignore[attr-defined]
            if score > best_score:
                best_score = score
                best = [(ns, ev)]  # type: ignore[list-item]
            elif score == best_score:
                best.append((ns, ev))  # type: ignore[arg-type]
        if not best:
            return None
        ns, ev = self.rng.choice(best) if pol.random_ties and len(best) > 1 else best[0]
        choice = pol.finish(ns, pod, ev, self.rng)
        return Selection(ns.name, ev.score, choice, assignment_for(ns, pod, choice))

    def place(
        self, pod: PodRequest, node: NodeName, policy: Policy | None = None
    ) -> Assignment | Verdict:
        """The assignment for the pod on `node`: the GPUs `select` would take there (the
        policy's evaluation, then its `finish`), or why there is none. Invariant I and init
        containers' reuse are `core.given_node.place`'s, on top of this."""
        return self._on_node(pod, node, policy or self.policy)

    def _on_node(self, pod: PodRequest, node: NodeName, policy: Policy) -> Assignment | Verdict:
        ns = self.state.node(node)
        ev = self.evaluate(ns, pod, policy)
        if ev is None:
            verdict = check(ns, pod)
            return (
                verdict
                if not verdict.ok
                else Verdict(verdict.code, ("policy found no GPU choice",))
            )
        return assignment_for(ns, pod, policy.finish(ns, pod, ev, self.rng))
