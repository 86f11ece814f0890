"""The cache's operations for binds, gang reservations and preemption's what-if.

Each takes the cache's lock itself (it is re-entrant, so a verb holding it across several steps
in `atomic()` may call them): the verbs, the bind flow, the gang coordinator and preemption
change the extender's state only through these.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from vgpu.core import gang as gang_planning
from vgpu.core.fit import Code, Verdict
from vgpu.core.given_node import place
from vgpu.core.handoff_rule import PendingContainer, pending_of
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.model import Assignment, Holding, Phase
from vgpu.core.policies import Policy
from vgpu.core.scheduler import Scheduler
from vgpu.extender.cacheviews import CacheFields
from vgpu.extender.claimgangs import is_claim_member
from vgpu.extender.gangs import GangWait
from vgpu.extender.podspec import PodSpec


class CacheOps(CacheFields):
    """Operations of `ClusterCache` other modules call to change or query one pod's state."""

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

    # -- binds -----------------------------------------------------------------------------------
    def pod(self, key: PodKey) -> PodSpec | None:
        """The pod as the watch (or `remember`) shows it."""
        with self._lock:
            return self._pods.get(key)

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
            return key in self._binding

    def assume(self, assignment: Assignment, now: float) -> None:
        """Hold `assignment` for a bind starting now (raises `Conflict` if the pod holds
        another place); the bind is in flight until `bind_done`."""
        with self._lock:
            self._ledger.assume(assignment)
            self._binding.add(assignment.pod)
            self._assumed_at[assignment.pod] = now
            self._picked_at.pop(assignment.pod, None)

    def pick(self, assignment: Assignment, now: float) -> None:
        """Hold the place of a watched pod whose filter passed one node, where kube-scheduler
        must now bind it, until its bind arrives (`assume`), its next filter (`drop_pick`) or
        `pick_ttl` passes. kube-scheduler binds asynchronously and filters the next pod at
        once (pkg/scheduler/schedule_one.go, ScheduleOne), so without it that filter sees
        the node as if this pod were not going there. Skipped if the pod holds a place."""
        with self._lock:
            if self._ledger.holding(assignment.pod) is None:
                self._ledger.assume(assignment)
                self._picked_at[assignment.pod] = now

    def drop_pick(self, key: PodKey) -> None:
        """Give back a pod's pick (it is being filtered again: the place is chosen anew)."""
        with self._lock:
            if self._picked_at.pop(key, None) is not None and key not in self._binding:
                self._release_assumed(key)

    def _release_assumed(self, key: PodKey) -> None:
        held = self._ledger.holding(key)
        if held is not None and held.phase is Phase.ASSUMED:
            self._ledger.release(key)

    def bind_done(self, key: PodKey) -> None:
        """The bind call returned (its assumption stays until confirmed, dropped or expired)."""
        with self._lock:
            self._binding.discard(key)

    def drop_assumption(self, key: PodKey) -> Holding | None:
        """The bind definitely failed: release the pod's assumption; returns it if there was
        one (a reservation or a bound holding is kept)."""
        with self._lock:
            self._assumed_at.pop(key, None)
            held = self._ledger.holding(key)
            if held is None or held.phase is not Phase.ASSUMED:
                return None
            self._ledger.release(key)
            return held

    def expire_assumptions(self, now: float, ttl: float, pick_ttl: float) -> None:
        """Release assumptions older than `ttl` whose bind is no longer in flight, and picks
        older than `pick_ttl` (their bind never came)."""
        with self._lock:
            for key, since in list(self._assumed_at.items()):
                if since + ttl > now or key in self._binding:
                    continue
                del self._assumed_at[key]
                self._release_assumed(key)
            for key, since in list(self._picked_at.items()):
                if since + pick_ttl <= now:
                    del self._picked_at[key]
                    self._release_assumed(key)

    def wait_changed(self, timeout: float) -> None:
        """Wait (holding the lock) until a pod event, a gang member filtered or `timeout`."""
        with self._lock:
            self._changed.wait(timeout)

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

    def place(
        self, spec: PodSpec, node: str, policy: Policy, scheduler: Scheduler
    ) -> Assignment | Verdict:
        """A fresh assignment on `node` keeping invariant I."""
        name = NodeName(node)
        with self._lock:
            if name not in self._node_states:
                return Verdict(Code.NO_GPU, (self._problems.get(name, f"node {node} is unknown"),))
            pending = self.pending_on(name, besides=spec.request.key)
            return place_read(scheduler, spec, name, pending, policy)

    def bind_failed(self, key: PodKey) -> None:
        """A bind definitely failed: give its assumption back, and plan a gang not yet started
        anew."""
        with self._lock:
            held = self.drop_assumption(key)
            gang = held.gang if held is not None else None
            if gang is not None and not self._gangs.started(gang):
                self._gangs.abandon(gang, f"binding member {key} failed")

    def sweep(self, now: float, assume_ttl: float, pick_ttl: float) -> None:
        """Release expired gang reservations, assumptions whose bind never completed and picks
        whose bind never came."""
        with self._lock:
            self._claim_gangs.expire(now)  # first: it tells the members why, the next does not
            self._gangs.expire(now)
            self.expire_assumptions(now, assume_ttl, pick_ttl)

    def pending_on(self, node: NodeName, *, besides: PodKey) -> list[PendingContainer]:
        """Pending containers on a node, of pods other than `besides`: bound and not admitted
        (from the watch), and assumed by a bind in flight whose pod the watch has not shown
        bound yet (kube-scheduler binds asynchronously, so the next bind can come first)."""
        seen = self._pending.get(node, {})
        out = [c for pod, cs in seen.items() if pod != besides for c in cs]
        for held in self._ledger.on_node(node):
            key = held.assignment.pod
            if held.phase is Phase.ASSUMED and key != besides and key not in seen:
                spec = self._pods.get(key)
                out += spec.pending(held.assignment) if spec else pending_of(held.assignment, {})
        return out

    def busy_nodes(self) -> set[str]:
        """Nodes with pending containers: bound and not admitted, or assumed by a bind."""
        busy: set[str] = set(self._pending)
        for held in self._ledger.holdings():
            if held.phase is Phase.ASSUMED:
                busy.add(held.assignment.node)
        return busy

    # -- gang reservations -----------------------------------------------------------------------
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

    # -- preemption ------------------------------------------------------------------------------
    @contextmanager
    def without(self, gone: Iterable[PodKey]) -> Iterator[None]:
        """The state as if the `gone` pods' holdings were released, reverted on exit."""
        with self._lock, self._state.what_if():
            for key in gone:
                self._ledger.release(key)
            yield


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
