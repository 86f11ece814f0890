"""The extender's view of the cluster, fed by node and pod watches.

One `ClusterState` + `Ledger` holds every node's free capacity and every pod's holding:

* bound pods are *confirmed* with their signed assignment (`vgpu.io/assignment`), or with their
  CPU and memory alone when they have none (a pod without a valid assignment gets no GPU from the
  node agent, so it holds none);
* the bind flow *assumes* pods it is binding, the gang coordinator *reserves* gang members;
* a deleted or finished pod releases its holding at once.

It is made of parts by role, each in its own module and each called under the cache's lock:
the node table (`vgpu.extender.node_table`), the pod book (`vgpu.extender.pod_book`: pods by
key, parsed once per content, their holdings, pending containers per node, invariant I of
docs/handshake.md, and gang members), the bind holds (`vgpu.extender.bind_holds`), the gang
coordinator (`vgpu.extender.gangs`) and the bind gate of gangs whose members use ResourceClaims
(`vgpu.extender.claimgangs`); the last two see the cache through `GangCache`
(`vgpu.extender.gang_cache`) only. This class is their facade and the one owner of the state and
of its lock:
other modules change it only through its operations (watch events; assume / bind_done /
held_place / place / bind_failed / sweep for binds; `gangs`, gang_filtered and claim_arrived for gangs;
`without` for preemption's what-if), each of which takes the lock itself; they read it through
read-only views (`pods`, `pending`, `ledger`, `feed`...) inside `atomic()`, which a verb also
holds across several steps that must see one state. Binds waiting for a gang wake on every pod
event (`wait_changed`). After a restart or a new leadership term, `replace_all` rebuilds it
from a fresh listing: bound pods are counted again, reservations and assumptions made before
are gone, and `restore_gangs` reserves again the places of gangs that have bound members.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import Any

from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core import gang as gang_planning
from vgpu.core.changes import DEFAULT_LIMIT, ChangeFeed
from vgpu.core.errors import InvalidRequest
from vgpu.core.fit import Code, Verdict
from vgpu.core.given_node import place
from vgpu.core.handoff_rule import PendingContainer
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import Assignment, Holding, Node
from vgpu.core.policy import Policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState, NodeState
from vgpu.extender.answers import FeedView
from vgpu.extender.bind_holds import BindHolds
from vgpu.extender.cacheviews import LedgerView
from vgpu.extender.claimgangs import ClaimGangs, is_claim_member
from vgpu.extender.gang_plans import Planner, core_planner
from vgpu.extender.gangs import GangCoordinator, GangWait
from vgpu.extender.node_table import NodeTable
from vgpu.extender.nodespec import node_spec
from vgpu.extender.pod_book import PodBook
from vgpu.extender.pod_parser import MALFORMED, PodParser
from vgpu.extender.podspec import PodSpec, key_of

log = logging.getLogger(__name__)

Obj = dict[str, Any]
InvalidHook = Callable[[Obj, str], None]
"""(the pod object, what is wrong with it): a watched pod the cache skipped."""


def canonical(assignment: Assignment) -> Assignment:
    """The assignment with containers in name order, as decoding the annotation yields them."""
    return replace(
        assignment, containers=tuple(sorted(assignment.containers, key=lambda c: c.name))
    )


def place_read(
    scheduler: Scheduler,
    spec: PodSpec,
    node: NodeName,
    pending: Sequence[PendingContainer],
    policy: Policy,
) -> Assignment | Verdict:
    """The core's placement for a read pod: its init-container roles and its pending grants."""
    return place(
        scheduler,
        spec.request,
        node,
        policy,
        roles=spec.roles,
        pending=pending,
        describe=spec.pending,
    )


class ClusterCache:
    """Watch-fed cluster state and ledger: the one owner of the extender's state (module doc)."""

    def __init__(
        self,
        *,
        key: bytes,
        memory_unit_mib: int,
        names: ResourceNames = DEFAULT_NAMES,
        gang_timeout: float = 60.0,
        planner: Planner = core_planner,
        feed_limit: int = DEFAULT_LIMIT,
    ) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._key = key
        self._names = names
        self._feed_limit = feed_limit
        self._parser = PodParser(memory_unit_mib, names)
        self._gangs = GangCoordinator(self, self._lock, timeout=gang_timeout, planner=planner)
        self._claim_gangs = ClaimGangs(self, self._gangs, gang_timeout)
        self._scheduler: Scheduler | None = None
        self._on_invalid: InvalidHook = lambda pod, problem: None
        self._binds = BindHolds()
        self._reset()

    def _reset(self) -> None:
        self._feed = ChangeFeed(limit=self._feed_limit)
        self._state = ClusterState(feed=self._feed)
        self._ledger = Ledger(self._state)
        self._table = NodeTable(self._state, self._feed)
        self._book = PodBook(self._state, self._ledger, self._feed, self._key)

    def subscribe(self, *, invalid: InvalidHook) -> None:
        """Be told when a watched pod cannot be read (the daemon's Events), outside the lock."""
        self._on_invalid = invalid

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Hold the state still across several steps that must see one state (a verb)."""
        with self._lock:
            yield

    def scheduler(self, policy: Policy) -> Scheduler:
        """The core's scheduler over the current state with `policy` as its default (kept until
        a rebuild or another default, so its random draws continue)."""
        with self._lock:
            if (
                self._scheduler is None
                or self._scheduler.state is not self._state
                or self._scheduler.policy is not policy
            ):
                self._scheduler = Scheduler(self._state, policy)
            return self._scheduler

    # -- the watches ---------------------------------------------------------------------------
    def apply_node(self, kind: str, obj: Obj) -> None:
        """Apply one node watch event (ADDED/MODIFIED upsert, DELETED forget)."""
        spec = node_spec(obj, self._names)
        with self._lock:
            if self._table.apply(kind, spec):
                self._book.hold_unheld_on(spec.node.name)

    def node_state(self, name: str) -> NodeState | None:
        """The node's state, or None when the extender does not know it."""
        return self._table.node_states.get(name)

    def parse(self, obj: Obj) -> PodSpec:
        """Parse a pod (raises `InvalidRequest`), once per version and once per content."""
        return self._parser.parse(obj)

    def parse_fresh(self, obj: Obj) -> PodSpec:
        """Parse a pod as `parse` does but keep nothing: for request bodies, which must never
        stand for a version the watch will see (`vgpu.extender.resolve`)."""
        return self._parser.parse_fresh(obj)

    def apply_pod(self, kind: str, obj: Obj) -> None:
        """Apply one pod watch event. Never raises on the pod's content: a pod that cannot be
        read holds nothing, is kept in `invalid` and reported to the `invalid` hook (`subscribe`).
        A version that changes nothing the cache reads (the pod's status...) changes nothing."""
        key = key_of(obj)
        if kind == "DELETED":  # its key is all that is needed
            with self._lock:
                self._forget(key)
                self._changed.notify_all()
            return
        try:
            spec: PodSpec | None = self.parse(obj)
            problem = None
        except InvalidRequest as err:
            spec, problem = None, str(err)
        with self._lock:
            if spec is not None and self._book.unchanged(key, spec, obj):
                return
            if spec is None or spec.terminal:
                self._forget(key)
            else:
                self._book.mark_invalid(key, None)
                problem = self._upsert_or_drop(key, spec, obj)
            if problem:
                self._book.mark_invalid(key, problem)
            self._changed.notify_all()
        if problem:
            self._on_invalid(obj, problem)

    def _upsert_or_drop(self, key: PodKey, spec: PodSpec, obj: Obj) -> str | None:
        """Upsert a parsed pod; if its annotations cannot be read, forget it instead."""
        try:
            self._book.upsert(key, spec, obj)
        except MALFORMED as err:
            self._forget(key)
            return f"metadata.annotations: unreadable ({type(err).__name__}: {err})"
        return None

    def remember(self, obj: Obj, spec: PodSpec) -> None:
        """Add a pod the API server has just returned (bind reads a pod the watch has not shown
        yet) before its watch event; never overrides the watch. Never fed from a request body."""
        with self._lock:
            if spec.request.key not in self._book.pods:
                self._book.upsert(spec.request.key, spec, obj)

    def _forget(self, key: PodKey) -> None:
        spec = self._book.forget(key)
        self._binds.forget_pod(key)
        if spec is not None:
            self._gangs.member_gone(key, spec.gang.key if spec.gang is not None else None)

    # -- rebuild -------------------------------------------------------------------------------
    def replace_all(self, nodes: Iterable[Obj], pods: Iterable[Obj]) -> None:
        """Rebuild everything from a fresh listing (start-up, new leadership term): gangs and
        assumptions are forgotten (their holdings are gone; `restore_gangs` reserves again the
        places of gangs with bound members); binds in flight still finish."""
        with self._lock:
            self._reset()
            self._gangs.reset()
            self._binds.forget_times()
            for node in nodes:
                self._apply_one(self.apply_node, node)
            for pod in pods:
                self._apply_one(self.apply_pod, pod)

    def _apply_one(self, apply: Callable[[str, Obj], None], obj: Obj) -> None:
        """One object of a rebuild: one that cannot be applied is skipped and logged (as the
        watch skips its event), never the end of the rebuild (issue 25, finding 1)."""
        try:
            apply("ADDED", obj)
        except Exception:  # a bug, not the listing: the other objects still count
            log.exception("rebuilding the cache: an object could not be applied; skipped")

    def unreadable(self) -> dict[str, int]:
        """Objects the cache holds that carry a value it cannot read, by kind: nodes (an
        unreadable inventory or allocatable) and pods (unreadable, or with an unreadable
        `vgpu.io/admitted`), for the `vgpu_extender_unreadable_objects` metric."""
        with self._lock:
            return {"node": self._table.unreadable_count(), "pod": self._book.unreadable_count()}

    def restore_gangs(
        self, scheduler: Scheduler, size_of: Callable[[GangKey], int | None]
    ) -> list[GangKey]:
        """Reserve again the places of gangs with bound members (after `replace_all` or the
        first sync): see `GangCoordinator.restore`."""
        with self._lock:
            return self._gangs.restore(scheduler, size_of)

    # -- binds (the bind holds: `vgpu.extender.bind_holds`) ------------------------------------
    def pod(self, key: PodKey) -> PodSpec | None:
        """The pod as the watch (or `remember`) shows it."""
        with self._lock:
            return self._book.pods.get(key)

    def holding(self, key: PodKey) -> Holding | None:
        """What the ledger holds for a pod."""
        with self._lock:
            return self._ledger.holding(key)

    def release(self, key: PodKey) -> None:
        """Give a pod's holding back, whatever its phase."""
        with self._lock:
            self._ledger.release(key)

    def binding(self, key: PodKey) -> bool:
        """Whether a bind of this pod is in flight."""
        with self._lock:
            return self._binds.binding(key)

    def assume(self, assignment: Assignment, now: float) -> None:
        """Hold `assignment` for a bind starting now (see `BindHolds.assume`)."""
        with self._lock:
            self._binds.assume(self._ledger, assignment, now)

    def pick(self, assignment: Assignment, now: float) -> None:
        """Hold the place of a watched pod whose filter passed one node (see `BindHolds.pick`)."""
        with self._lock:
            self._binds.pick(self._ledger, assignment, now)

    def drop_pick(self, key: PodKey) -> None:
        """Give back a pod's pick (it is being filtered again: the place is chosen anew)."""
        with self._lock:
            self._binds.drop_pick(self._ledger, key)

    def bind_done(self, key: PodKey) -> None:
        """The bind call returned (its assumption stays until confirmed, dropped or expired)."""
        with self._lock:
            self._binds.bind_done(key)

    def drop_assumption(self, key: PodKey) -> Holding | None:
        """The bind definitely failed: release the pod's assumption, returned if there was one."""
        with self._lock:
            return self._binds.drop_assumption(self._ledger, key)

    def expire_assumptions(self, now: float, ttl: float, pick_ttl: float) -> None:
        """Release assumptions and picks past their time (see `BindHolds.expire`)."""
        with self._lock:
            self._binds.expire(self._ledger, now, ttl, pick_ttl)

    def wait_changed(self, timeout: float) -> None:
        """Wait (holding the lock) until a pod event, a gang member filtered or `timeout`."""
        with self._lock:
            self._changed.wait(timeout)

    def place(
        self, spec: PodSpec, node: str, policy: Policy, scheduler: Scheduler
    ) -> Assignment | Verdict:
        """A fresh assignment on `node` keeping invariant I."""
        name = NodeName(node)
        with self._lock:
            if name not in self._table.node_states:
                problem = self._table.problems.get(name, f"node {node} is unknown")
                return Verdict(Code.NO_GPU, (problem,))
            pending = self._book.pending_on(name, besides=spec.request.key)
            return place_read(scheduler, spec, name, pending, policy)

    def pending_on(self, node: NodeName, *, besides: PodKey) -> list[PendingContainer]:
        """Pending containers on a node of pods other than `besides` (`PodBook.pending_on`)."""
        return self._book.pending_on(node, besides=besides)

    def busy_nodes(self) -> set[str]:
        """Nodes with pending containers: bound and not admitted, or assumed by a bind."""
        return self._book.busy_nodes()

    def sweep(self, now: float, assume_ttl: float, pick_ttl: float) -> None:
        """Release expired gang reservations, assumptions whose bind never completed and picks
        whose bind never came."""
        with self._lock:
            self._claim_gangs.expire(now)  # first: it tells the members why, the next does not
            self._gangs.expire(now)
            self._binds.expire(self._ledger, now, assume_ttl, pick_ttl)

    # -- gangs (`vgpu.extender.gangs`, `vgpu.extender.claimgangs`) -----------------------------
    def held_place(
        self, spec: PodSpec, size: int, scheduler: Scheduler, now: float
    ) -> Assignment | GangWait | None:
        """Where the pod must go: its gang place, its own holding, or None (anywhere)."""
        req = spec.request
        with self._lock:
            if spec.gang is not None and is_claim_member(spec):
                return self._claim_gangs.place_of(spec, size)
            if spec.gang is not None:
                if problem := self._claim_gangs.mixed(spec.gang.key):
                    return GangWait(problem)
                return self._gangs.place_of(req, spec.gang, size, scheduler, now)
            held = self._ledger.holding(req.key)
        # An assumption left by a bind whose outcome is unknown steers the retry to the same
        # place (it is released when the watch shows otherwise or `assume_ttl` passes).
        return None if held is None else held.assignment

    def claim_arrived(
        self, spec: PodSpec, node: str, policy: Policy, scheduler: Scheduler, now: float
    ) -> str | None:
        """A claim gang member reached bind on `node`, where kube-scheduler's DRA plugin has
        allocated its claims: hold its (CPU-only) place there, confirmed, and wake the binds
        waiting for its gang. Returns why it cannot be held."""
        with self._lock:
            place = partial(self.place, spec, node, policy, scheduler)
            problem = self._claim_gangs.arrive(spec, node, place, now)
            if problem is None:
                self._changed.notify_all()
            return problem

    def gang_filtered(self, gang: GangKey, pod: PodKey) -> None:
        """A gang member passed filter on its reserved node: wake the binds waiting for it."""
        with self._lock:
            self._gangs.filtered(gang, pod)
            self._changed.notify_all()

    def bind_failed(self, key: PodKey) -> None:
        """A bind definitely failed: give its assumption back, and plan a gang not yet started
        anew."""
        with self._lock:
            held = self._binds.drop_assumption(self._ledger, key)
            gang = held.gang if held is not None else None
            if gang is not None and not self._gangs.started(gang):
                self._gangs.abandon(gang, f"binding member {key} failed")

    def reserve_gang(self, plan: gang_planning.GangPlan, deadline: float) -> None:
        """Hold every member's place of a planned gang until `deadline` (all or nothing)."""
        with self._lock:
            gang_planning.reserve(self._ledger, plan, deadline=deadline)

    def release_gang(self, gang: GangKey) -> list[PodKey]:
        """Give back every reservation of a gang (bound members stay); the released pods."""
        with self._lock:
            return gang_planning.release(self._ledger, gang)

    def extend_reservation(self, key: PodKey, deadline: float) -> None:
        """Move a reservation's deadline (other holdings are left alone)."""
        with self._lock:
            self._ledger.extend(key, deadline)

    @contextmanager
    def without(self, gone: Iterable[PodKey]) -> Iterator[None]:
        """Preemption's what-if: the state as if the `gone` pods' holdings were released,
        reverted on exit."""
        with self._lock, self._state.what_if():
            for key in gone:
                self._ledger.release(key)
            yield

    # -- read-only views (callers read them inside `atomic()`) ---------------------------------
    @property
    def feed(self) -> FeedView:
        """Names every node whose answers may have changed: its state, its pending containers,
        its problem (read by the verbs' answer sets, `vgpu.extender.answers`)."""
        return self._feed

    @property
    def gangs(self) -> GangCoordinator:
        """The gang reservations (their operations take this cache's lock)."""
        return self._gangs

    @property
    def ledger(self) -> LedgerView:
        """Every pod's holding (assumed, reserved, bound)."""
        return self._ledger

    @property
    def nodes(self) -> Mapping[NodeName, Node]:
        """Known nodes as last read from the watch."""
        return self._table.nodes

    @property
    def node_states(self) -> Mapping[str, NodeState]:
        """Node states by name, for the per-node hot loops."""
        return self._table.node_states

    @property
    def problems(self) -> Mapping[NodeName, str]:
        """Why a node offers no GPU (no or unreadable inventory), by node."""
        return self._table.problems

    @property
    def pods(self) -> Mapping[PodKey, PodSpec]:
        """Watched pods by key, parsed."""
        return self._book.pods

    @property
    def invalid(self) -> Mapping[PodKey, str]:
        """Watched pods that cannot be read, and why (they hold nothing)."""
        return self._book.invalid

    @property
    def unheld(self) -> Mapping[PodKey, Assignment]:
        """Bound pods that cannot be counted yet (their node is unknown or too small)."""
        return self._book.unheld

    @property
    def pending(self) -> Mapping[NodeName, Mapping[PodKey, Sequence[PendingContainer]]]:
        """Containers bound and not admitted, by node and pod (invariant I)."""
        return self._book.pending

    @property
    def members(self) -> Mapping[GangKey, AbstractSet[PodKey]]:
        """Watched gang members by gang."""
        return self._book.members
