"""The filter and prioritize verbs over the watch-fed cache (bind lives in `binder`).

Filter answers per node from the core's fit check, memoised per node and pod shape until the
node changes, so a request naming 5,000 nodes costs a dictionary lookup per node in the steady
state. Nodes with containers pending admission get the full invariant-I placement. Gang members
and pods with a holding are sent to the node they hold. Failed nodes carry the core's reasons;
GPU type, GPU count and missing inventory are unresolvable, the rest resolvable. With
`filter_best` the filter passes only the nodes the policy scores best (ties, at most that many):
kube-scheduler then skips scoring when one is left, so a pod costs it one call to us, not two,
and its own scoring still chooses among nodes equal for the GPUs. Without it, the filter never
narrows a pod to one node unless the pod already holds a place there.

State comes only from the watches and the extender's own binds. A request only names its pod
(namespace, name, UID): every verb reads the watch's view of that pod, never the request's body
(`PodReader.read`). A pod the watch does not show yet is waited for, a bounded time and for a
bounded number of requests at once, then answered with an error that kube-scheduler retries
after its backoff, and counted (`on_unwatched`; `vgpu.extender.watchwait` says why an error and
not a GET of the pod). Only a watched pod of a scheduler the extender serves
(`ExtenderConfig.schedulers`) feeds the policy's learner, holds a pick or takes part in a gang
plan (whose reservations are writes): a forged request can neither charge capacity nor reserve
it (docs/threat-model.md).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

from vgpu.api.podspec import PodSpec, key_of
from vgpu.api.policies import PolicyBook
from vgpu.core.errors import InvalidRequest
from vgpu.core.fit import check
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.kubelet_reuse import reuses
from vgpu.core.model import Assignment
from vgpu.core.policy.interface import Policy
from vgpu.core.scheduler import Scheduler
from vgpu.extender.answers import AnswerBook
from vgpu.extender.cache.cluster import ClusterCache, place_read
from vgpu.extender.config import DEFAULT_CONFIG, ExtenderConfig
from vgpu.extender.gangs.coordinator import GangWait
from vgpu.extender.outcomes import (
    FIT,
    NO_GPU,
    UNKNOWN,
    Outcome,
    filter_answers,
    outcome_of,
    placed_outcome,
    shape_key,
)
from vgpu.extender.preemption_wait import PreemptionWaits
from vgpu.extender.queues.cache_view import QueueParts
from vgpu.extender.resolve import (
    GroupSize,
    PodReader,
    no_pod_groups,
)
from vgpu.extender.scores import ScoreAnswers, log_top_scores
from vgpu.extender.watchwait import NotWatched, WatchWait
from vgpu.extender.wire import ExtenderArgs, FilterResult, Grouped, Priorities

log = logging.getLogger(__name__)

NOT_OURS = "another scheduler's gang member: the vgpu extender holds it no place"


class Extender:
    """Filter and prioritize; shared state for `Binder`."""

    def __init__(
        self,
        cache: ClusterCache,
        *,
        config: ExtenderConfig = DEFAULT_CONFIG,
        clock: Callable[[], float] = time.monotonic,
        group_size: GroupSize = no_pod_groups,
        on_rejections: Callable[[Counter[str]], None] = lambda c: None,
        on_unwatched: Callable[[], None] = lambda: None,
        on_preemption_wait: Callable[[], None] = lambda: None,
    ) -> None:
        if cache.schedulers != config.schedulers:
            raise ValueError(
                f"the cache serves schedulers {sorted(cache.schedulers)}, the verbs "
                f"{sorted(config.schedulers)}: make the cache with the config's schedulers "
                "(ClusterCache(schedulers=...)), or a gang's members would differ between them"
            )
        self.cache = cache
        self.config = config
        self.clock = clock
        self.on_rejections = on_rejections
        self.on_unwatched = on_unwatched
        """Told of each filter failed because the watch does not show its pod."""
        self.on_preemption_wait = on_preemption_wait
        """Told of each filter answered with an error lest the pod preempt."""
        watch = WatchWait(cache, timeout=config.watch_wait, waiters=config.watch_waiters)
        policies = PolicyBook(config.policy, config.pod_policies)
        self.pods = PodReader(cache, policies, group_size, watch)
        """How the verbs read a request's pod (shared with `Binder` and `Preemptor`)."""
        self.answers = AnswerBook()
        self.waits = PreemptionWaits()
        """Pods retried instead of refused, lest they preempt (under the cache's lock)."""

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler over the cache's current state (rebuilt with it)."""
        return self.cache.scheduler(self.policies.default)

    # -- shared steps ----------------------------------------------------------------------------
    @property
    def policies(self) -> PolicyBook:
        """The default policy and those pods may name."""
        return self.pods.policies

    @policies.setter
    def policies(self, book: PolicyBook) -> None:
        self.pods.policies = book

    def queue_parts(self) -> QueueParts:
        """What the leader's queue pass may use of the extender
        (`vgpu.extender.queues.cache_view`)."""
        return QueueParts(
            self.cache,
            lambda: self.scheduler,
            self.clock,
            self.config,
            lambda spec: self.pods.resolve(spec).gang_size,
        )

    def restore_gangs(self) -> None:
        """After the cache is rebuilt or first synced: gangs with bound members get their
        other members' places reserved again, before any other pod is served."""

        def size_of(gang: GangKey) -> int | None:
            for key in sorted(self.cache.members.get(gang, ())):
                spec = self.cache.pods.get(key)
                if spec is not None:
                    try:
                        return self.pods.resolve(spec).gang_size
                    except InvalidRequest:
                        return None
            return None

        with self.cache.atomic():
            self.cache.restore_gangs(self.scheduler, size_of)

    def sweep(self) -> None:
        """Release expired gang reservations and assumptions whose bind never completed."""
        self.cache.sweep(self.clock(), self.config.assume_ttl, self.config.pick_ttl)

    # -- filter ----------------------------------------------------------------------------------
    def filter(self, args: ExtenderArgs) -> FilterResult:
        """The filter verb."""
        try:
            spec, policy, size = self.pods.read(args.pod)
        except NotWatched as err:
            return self._unwatched(args, err)
        except InvalidRequest as err:
            return FilterResult(error=f"pod {key_of(args.pod)}: {err}")
        ours = spec.scheduler in self.config.schedulers
        with self.cache.atomic():
            if spec.gang is not None and not ours:
                return FilterResult(failed=dict.fromkeys(args.node_names, NOT_OURS))
            if ours:
                self.cache.drop_pick(spec.request.key)
            target = self.cache.held_place(spec, size, self.scheduler, self.clock())
            if isinstance(target, GangWait):
                result = FilterResult(failed=dict.fromkeys(args.node_names, target.reason))
            elif target is not None:
                result = self._only(target, args.node_names)
                if spec.gang is not None and target.node in args.node_names:
                    self.cache.gang_filtered(spec.gang.key, spec.request.key)
            elif not spec.request.wants_gpu:
                result = FilterResult(passed=list(args.node_names))
            else:
                if ours:
                    policy.observe(spec.request)
                result = self._filter_gpu(spec, args.node_names, policy)
                if not result.passed:
                    result = self._unless_soon(spec, result)
                one = self.config.filter_best and len(result.passed) == 1
                if one and ours and spec.gang is None:  # gangs hold their plan instead
                    self._pick(spec, result.passed[0], policy)
        return result

    def _unwatched(self, args: ExtenderArgs, err: NotWatched) -> FilterResult:
        """A filter for a pod the watch does not show: an error, which kube-scheduler retries
        after its backoff (`vgpu.extender.watchwait` says why not every node refused)."""
        log.debug("filter for %s: %s", key_of(args.pod), err)
        self.on_unwatched()
        return FilterResult(error=f"pod {key_of(args.pod)}: {err}")

    def _unless_soon(self, spec: PodSpec, result: FilterResult) -> FilterResult:
        """Every node refused: an error instead (retried after backoff, no PostFilter) where a
        node takes the pod in a moment and a refusal could make kube-scheduler preempt for it
        (`vgpu.extender.preemption_wait`)."""
        error = self.waits.error(self.cache, spec, result.failed, self.clock())
        if error is None:
            return result
        self.on_preemption_wait()
        return FilterResult(error=error)

    def _pick(self, spec: PodSpec, node: str, policy: Policy) -> None:
        """Hold the one node's place for the pod until its bind (`ClusterCache.pick`); only
        for pods the watch shows, as for gang plans, so a forged request holds nothing."""
        placed = self.cache.place(spec, node, policy, self.scheduler)
        if isinstance(placed, Assignment):
            self.cache.pick(placed, self.clock())

    def _only(self, target: Assignment, names: list[str]) -> FilterResult:
        why = f"{target.pod} holds a place on node {target.node}"
        result = FilterResult()
        for name in names:
            if name == target.node:
                result.passed.append(name)
            else:
                result.failed[name] = why
        return result

    def _filter_gpu(self, spec: PodSpec, names: list[str], policy: Policy) -> FilterResult:
        """Per node outcomes from the pod shape's answer set; only failures are looked at one by one.

        A node's outcome depends on its state, its pending containers (invariant I: the
        placement, hence the policy, its generation, the container names the reasons quote
        and the memory blocks) and its problem; the feed names the node when any changes, and
        a new policy generation drops the outcomes of nodes with pending containers."""
        if spec.node:  # pending on its own node: placements would exclude itself, not memoised
            return self._filter_slow(spec, names, policy)
        known = (
            self.answers.get(
                self.cache.feed, ("filter", *shape_key(spec), id(policy)), filter_answers
            )
            if policy.cacheable
            else filter_answers(self.cache.feed)
        )
        if known.generation != policy.generation:
            known.forget(self.cache.pending_nodes())
            known.generation = policy.generation
        passed, rest = known.split(names, lambda name: self.outcome(spec, name, policy))
        if self.config.filter_best and len(passed) > 1:
            if log.isEnabledFor(logging.DEBUG):
                log_top_scores(spec.request.key, passed, policy.name, self._score_of(spec, policy))
            passed = self._score_answers(spec, policy).best(
                passed, self._score_of(spec, policy), self.config.filter_best
            )
        result = FilterResult(passed=passed)
        if not rest:
            return result
        failed, unresolvable, answers = result.failed, result.unresolvable, known.answers
        codes: Counter[str] = Counter()
        for name in rest:
            answer = answers[name]
            (unresolvable if answer.unresolvable else failed)[name] = answer.reason
            codes[answer.code] += 1
        self.on_rejections(codes)
        return result

    def _filter_slow(self, spec: PodSpec, names: list[str], policy: Policy) -> FilterResult:
        """Node by node, nothing kept (a pod already bound somewhere, filtered again)."""
        result = FilterResult()
        for name in names:
            outcome = self.outcome(spec, name, policy)
            if outcome is FIT:
                result.passed.append(name)
            else:
                (result.unresolvable if outcome.unresolvable else result.failed)[name] = (
                    outcome.reason
                )
        return result

    def outcome(
        self, spec: PodSpec, name: str, policy: Policy, *, gone: frozenset[PodKey] = frozenset()
    ) -> Outcome:
        """The pod's outcome on one node, pending containers (invariant I) included; the
        pending containers of pods in `gone` (preemption victims) do not count."""
        ns = self.cache.node_states.get(name)
        if ns is None:
            return UNKNOWN
        node = NodeName(name)
        if not reuses(spec.request, spec.roles):  # else charged as the kubelet reuses: placed
            outcome = outcome_of(check(ns, spec.request))
            if outcome is not FIT:
                problem = self.cache.problems.get(node) if outcome.code == NO_GPU else None
                return outcome._replace(reason=problem) if problem else outcome
        return self._admissible(spec, node, policy, gone)

    def _admissible(
        self, spec: PodSpec, node: NodeName, policy: Policy, gone: frozenset[PodKey] = frozenset()
    ) -> Outcome:
        """The outcome on a node whose free capacity fits the pod: placed as the kubelet will
        admit it (init containers reused on one GPU) and keeping invariant I with the
        containers pending there, bound but not admitted (watched) or assumed by a bind in
        flight. Prioritize calls it directly: its evaluation has already checked the fit."""
        pending = self.cache.pending_on(node, besides=spec.request.key)
        if gone:
            pending = [c for c in pending if c.pod not in gone]
        if not pending and not reuses(spec.request, spec.roles):
            return FIT
        return placed_outcome(place_read(self.scheduler, spec, node, pending, policy))

    # -- prioritize ------------------------------------------------------------------------------
    def prioritize(self, args: ExtenderArgs) -> Grouped | Priorities:
        """The prioritize verb: 0..10 per node (0 for nodes the pod cannot use)."""
        names = args.node_names
        try:  # no wait: a prioritize follows a filter that found the pod; errors score 0
            spec, policy, _ = self.pods.read(args.pod, wait=False)
        except InvalidRequest:
            return Priorities(names, [0] * len(names))
        with self.cache.atomic():
            held = self.cache.ledger.holding(spec.request.key)
            if held is not None:
                there = held.assignment.node
                return Priorities(names, [10 if n == there else 0 for n in names])
            if not spec.request.wants_gpu:
                return Priorities(names, [0] * len(names))
            if spec.scheduler in self.config.schedulers:
                policy.observe(spec.request)
            return self._priorities(spec, names, policy)

    def _priorities(self, spec: PodSpec, names: list[str], policy: Policy) -> Grouped:
        """Scaled policy scores from the pod's answer set (raw scores: None = cannot go there now).

        A node where the pod would have to wait for another pod's admission (invariant I)
        scores None like one it does not fit: its filter may have run before that other pod's
        bind arrived, and steering the pod there would only get its bind refused."""
        return self._score_answers(spec, policy).reply(names, self._score_of(spec, policy))

    def _score_answers(self, spec: PodSpec, policy: Policy) -> ScoreAnswers:
        """The pod shape's raw scores under `policy` (shared by filter and prioritize)."""
        key = ("score", *shape_key(spec), id(policy), policy.generation)
        if policy.cacheable:
            return self.answers.get(self.cache.feed, key, ScoreAnswers)
        return ScoreAnswers(self.cache.feed)

    def _score_of(self, spec: PodSpec, policy: Policy) -> Callable[[str], float | None]:
        """A node's raw score for the pod: None where it cannot go now (see `_priorities`)."""
        pod, states = spec.request, self.cache.node_states
        rng, evaluate = self.scheduler.rng, policy.evaluate

        def score(name: str) -> float | None:
            ns = states.get(name)
            ev = None if ns is None else evaluate(ns, pod, rng)
            if ev is None or self._admissible(spec, NodeName(name), policy) is not FIT:
                return None
            return ev.score

        return score
