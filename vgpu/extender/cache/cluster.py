"""The extender's view of the cluster, fed by node and pod watches (docs/architecture.md,
"The extender's state").

One `ClusterCache` is the one owner of the extender's state and of its lock, and the facade over
its parts by role, each in its own module and each called under that lock: the state and lock
(`parts`), the watch intake (`intake`), the node table (`node_table`), the pod book
(`pods.book`), the bind holds (`bind_holds`), the gang coordinator (`gangs.coordinator`) and the
bind gate of claim gangs (`gangs.claims`), the last two seeing the cache through `GangCache` only.
Bound pods are confirmed with their signed assignment (or their CPU and memory alone), binds
*assume* the pods they bind, gangs *reserve* their members, a deleted or finished pod releases its
holding at once. Other modules change the state only through the operations below, each taking the
lock; they read it through read-only views inside `atomic()`. Binds waiting for a gang wake on every
pod event (`wait_changed`). After a restart or a new leadership term `replace_all` rebuilds it from
a fresh listing and `restore_gangs` reserves again the places of gangs with bound members.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from functools import partial
from typing import ClassVar

from vgpu.api.nodefit import NodeFacts
from vgpu.api.podspec import VGPU_SCHEDULER, PodSpec
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core import gang as gang_planning
from vgpu.core.changes import DEFAULT_LIMIT
from vgpu.core.fit import Code, Verdict
from vgpu.core.handoff_rule import PendingContainer
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.model import Assignment, Holding, Node
from vgpu.core.policy.interface import Policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import NodeState
from vgpu.extender.answers import FeedView
from vgpu.extender.cache.intake import WatchIntake
from vgpu.extender.cache.parts import CacheParts, InvalidHook, Obj
from vgpu.extender.gangs.claims import ClaimGangs, is_claim_member
from vgpu.extender.gangs.coordinator import GangCoordinator, GangWait
from vgpu.extender.gangs.plans import Planner, core_planner
from vgpu.extender.ledger_view import LedgerView
from vgpu.extender.pods.place import canonical, place_read

__all__ = ["ClusterCache", "canonical", "place_read"]  # the last two: `pods.place`

log = logging.getLogger(__name__)


class ClusterCache:
    """Watch-fed cluster state and ledger: the one owner of the extender's state (module doc)."""

    _parts_type: ClassVar[type[CacheParts]] = CacheParts
    """What holds the state; a test swaps in a variant (tests/extender/test_watch_versions.py)."""

    def __init__(
        self,
        *,
        key: bytes,
        memory_unit_mib: int,
        names: ResourceNames = DEFAULT_NAMES,
        gang_timeout: float = 60.0,
        planner: Planner = core_planner,
        feed_limit: int = DEFAULT_LIMIT,
        schedulers: AbstractSet[str] = frozenset({VGPU_SCHEDULER}),
    ) -> None:
        """`schedulers`: the pods' schedulers the extender serves (`ExtenderConfig.schedulers`);
        only their pods are gang members (`vgpu.extender.pods.book`)."""
        self._parts = parts = self._parts_type(
            key=key,
            memory_unit_mib=memory_unit_mib,
            names=names,
            feed_limit=feed_limit,
            schedulers=schedulers,
        )
        self._lock = parts.lock
        self._changed = parts.changed
        self._binds = parts.binds
        self._gangs = GangCoordinator(self, self._lock, timeout=gang_timeout, planner=planner)
        self._claim_gangs = ClaimGangs(self, self._gangs, gang_timeout)
        self._watch = WatchIntake(parts, self._gangs)
        self._scheduler: Scheduler | None = None

    def subscribe(self, *, invalid: InvalidHook) -> None:
        """Be told when a watched pod cannot be read (the daemon's Events), outside the lock."""
        self._parts.on_invalid = invalid

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
                or self._scheduler.state is not self._parts.state
                or self._scheduler.policy is not policy
            ):
                self._scheduler = Scheduler(self._parts.state, policy)
            return self._scheduler

    # -- the watches (`vgpu.extender.cache.intake`) --------------------------------------------
    def apply_node(self, kind: str, obj: Obj) -> None:
        """Apply one node watch event (ADDED/MODIFIED upsert, DELETED forget)."""
        self._watch.apply_node(kind, obj)

    def apply_pod(self, kind: str, obj: Obj) -> None:
        """Apply one pod watch event. Never raises on the pod's content: a pod that cannot be
        read holds nothing, is kept in `invalid` and reported to the `invalid` hook (`subscribe`).
        A version that changes nothing the cache reads (the pod's status...) changes nothing."""
        self._watch.apply_pod(kind, obj)

    def remember(self, obj: Obj, spec: PodSpec) -> None:
        """Add a pod the API server has just returned (bind reads a pod the watch has not shown
        yet) before its watch event; never overrides the watch. Never fed from a request body."""
        self._watch.remember(obj, spec)

    def replace_all(self, nodes: Iterable[Obj], pods: Iterable[Obj]) -> None:
        """Rebuild everything from a fresh listing (start-up, new leadership term): gangs and
        assumptions are forgotten (their holdings are gone; `restore_gangs` reserves again the
        places of gangs with bound members); binds in flight still finish."""
        self._watch.replace_all(nodes, pods)

    def unreadable(self) -> dict[str, int]:
        """Objects the cache holds that carry a value it cannot read, by kind: nodes (an
        unreadable inventory or allocatable) and pods (unreadable, or with an unreadable
        `vgpu.io/admitted`), for the `vgpu_extender_unreadable_objects` metric."""
        return self._watch.unreadable()

    def node_state(self, name: str) -> NodeState | None:
        """The node's state, or None when the extender does not know it."""
        return self._parts.table.node_states.get(name)

    def parse(self, obj: Obj) -> PodSpec:
        """Parse a pod (raises `InvalidRequest`), once per version and once per content."""
        return self._parts.parser.parse(obj)

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
            return self._parts.book.pods.get(key)

    def holding(self, key: PodKey) -> Holding | None:
        """What the ledger holds for a pod."""
        with self._lock:
            return self._parts.ledger.holding(key)

    def release(self, key: PodKey) -> None:
        """Give a pod's holding back, whatever its phase."""
        with self._lock:
            self._parts.ledger.release(key)

    def binding(self, key: PodKey) -> bool:
        """Whether a bind of this pod is in flight."""
        with self._lock:
            return self._binds.binding(key)

    def assume(self, assignment: Assignment, now: float) -> None:
        """Hold `assignment` for a bind starting now (see `BindHolds.assume`)."""
        with self._lock:
            self._binds.assume(self._parts.ledger, assignment, now)

    def pick(self, assignment: Assignment, now: float) -> None:
        """Hold the place of a watched pod whose filter passed one node (see `BindHolds.pick`)."""
        with self._lock:
            self._binds.pick(self._parts.ledger, assignment, now)

    def drop_pick(self, key: PodKey) -> None:
        """Give back a pod's pick (it is being filtered again: the place is chosen anew)."""
        with self._lock:
            self._binds.drop_pick(self._parts.ledger, key)

    def bind_done(self, key: PodKey) -> None:
        """The bind call returned (its assumption stays until confirmed, dropped or expired)."""
        with self._lock:
            self._binds.bind_done(key)

    def drop_assumption(self, key: PodKey) -> Holding | None:
        """The bind definitely failed: release the pod's assumption, returned if there was one."""
        with self._lock:
            return self._binds.drop_assumption(self._parts.ledger, key)

    def expire_assumptions(self, now: float, ttl: float, pick_ttl: float) -> None:
        """Release assumptions and picks past their time (see `BindHolds.expire`)."""
        with self._lock:
            self._binds.expire(self._parts.ledger, now, ttl, pick_ttl)

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
            if name not in self._parts.table.node_states:
                problem = self._parts.table.problems.get(name, f"node {node} is unknown")
                return Verdict(Code.NO_GPU, (problem,))
            pending = self._parts.book.pending_on(name, besides=spec.request.key)
            return place_read(scheduler, spec, name, pending, policy)

    def pending_on(self, node: NodeName, *, besides: PodKey) -> list[PendingContainer]:
        """Pending containers on a node of pods other than `besides` (`PodBook.pending_on`)."""
        return self._parts.book.pending_on(node, besides=besides)

    def pending_nodes(self) -> set[str]:
        """Every node `pending_on` may name containers on (a superset): the nodes of the few
        pods bound and not admitted, assumed by a bind or picked by a filter, found without
        walking every holding (those with an assumption or pick already confirmed by the watch
        included)."""
        with self._lock:
            nodes = {str(node) for node in self._parts.book.pending}
            for key in self._binds.held():
                held = self._parts.ledger.holding(key)
                if held is not None:
                    nodes.add(held.assignment.node)
            return nodes

    def sweep(self, now: float, assume_ttl: float, pick_ttl: float) -> None:
        """Release expired gang reservations, assumptions whose bind never completed and picks
        whose bind never came."""
        with self._lock:
            self._claim_gangs.expire(now)  # first: it tells the members why, the next does not
            self._gangs.expire(now)
            self._binds.expire(self._parts.ledger, now, assume_ttl, pick_ttl)

    # -- gangs (`vgpu.extender.gangs.coordinator`, `vgpu.extender.gangs.claims`) ---------------
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
            held = self._parts.ledger.holding(req.key)
        # An assumption left by a bind whose outcome is unknown steers the retry to the same
        # place (it is released when the watch shows otherwise or `assume_ttl` passes).
        return None if held is None else held.assignment

    def gang_wait(self, spec: PodSpec, size: int) -> GangWait | None:
        """Why the pod's gang cannot be placed whatever is freed for it (fewer than `size`
        members exist, or it mixes claim and vgpu.io members), if it cannot; None for a pod
        outside any gang. Preemption offers no node then: evictions would not let it in."""
        if spec.gang is None:
            return None
        with self._lock:
            if problem := self._claim_gangs.mixed(spec.gang.key):
                return GangWait(problem)
            return self._gangs.incomplete(spec.gang.key, spec.request.key, size)

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
            held = self._binds.drop_assumption(self._parts.ledger, key)
            gang = held.gang if held is not None else None
            if gang is not None and not self._gangs.started(gang):
                self._gangs.abandon(gang, f"binding member {key} failed")

    def reserve_gang(self, plan: gang_planning.GangPlan, deadline: float) -> None:
        """Hold every member's place of a planned gang until `deadline` (all or nothing)."""
        with self._lock:
            gang_planning.reserve(self._parts.ledger, plan, deadline=deadline)

    def release_gang(self, gang: GangKey) -> list[PodKey]:
        """Give back every reservation of a gang (bound members stay); the released pods."""
        with self._lock:
            return gang_planning.release(self._parts.ledger, gang)

    def extend_reservation(self, key: PodKey, deadline: float) -> None:
        """Move a reservation's deadline (other holdings are left alone)."""
        with self._lock:
            self._parts.ledger.extend(key, deadline)

    @contextmanager
    def without(self, gone: Iterable[PodKey]) -> Iterator[None]:
        """Preemption's what-if: the state as if the `gone` pods' holdings were released,
        reverted on exit."""
        with self._lock, self._parts.state.what_if():
            for key in gone:
                self._parts.ledger.release(key)
            yield

    # -- read-only views (callers read them inside `atomic()`) ---------------------------------
    @property
    def feed(self) -> FeedView:
        """Names every node whose answers may have changed: its state, its pending containers,
        its problem (read by the verbs' answer sets, `vgpu.extender.answers`)."""
        return self._parts.feed

    @property
    def gangs(self) -> GangCoordinator:
        """The gang reservations (their operations take this cache's lock)."""
        return self._gangs

    @property
    def ledger(self) -> LedgerView:
        """Every pod's holding (assumed, reserved, bound)."""
        return self._parts.ledger

    @property
    def nodes(self) -> Mapping[NodeName, Node]:
        """Known nodes as last read from the watch."""
        return self._parts.table.nodes

    @property
    def node_states(self) -> Mapping[str, NodeState]:
        """Node states by name, for the per-node hot loops."""
        return self._parts.table.node_states

    @property
    def node_facts(self) -> Mapping[str, NodeFacts]:
        """Each watched node's labels and hard taints (`vgpu.api.nodefit`), by name."""
        return self._parts.node_facts

    @property
    def problems(self) -> Mapping[NodeName, str]:
        """Why a node offers no GPU (no or unreadable inventory), by node."""
        return self._parts.table.problems

    @property
    def kubelet_holds(self) -> AbstractSet[NodeName]:
        """Nodes whose kubelet still holds devices for deleted pods."""
        return self._parts.table.kubelet_holds

    @property
    def pods(self) -> Mapping[PodKey, PodSpec]:
        """Watched pods by key, parsed."""
        return self._parts.book.pods

    @property
    def invalid(self) -> Mapping[PodKey, str]:
        """Watched pods that cannot be read, and why (they hold nothing)."""
        return self._parts.book.invalid

    @property
    def unheld(self) -> Mapping[PodKey, Assignment]:
        """Bound pods that cannot be counted yet (their node is unknown or too small)."""
        return self._parts.book.unheld

    @property
    def pending(self) -> Mapping[NodeName, Mapping[PodKey, Sequence[PendingContainer]]]:
        """Containers bound and not admitted, by node and pod (invariant I)."""
        return self._parts.book.pending

    @property
    def schedulers(self) -> AbstractSet[str]:
        """The pods' schedulers the extender serves (only their pods are gang members)."""
        return self._parts.schedulers

    @property
    def members(self) -> Mapping[GangKey, AbstractSet[PodKey]]:
        """Watched gang members by gang (pods of `schedulers` only)."""
        return self._parts.book.members
