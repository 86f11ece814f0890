"""Gang coordination: all members of a pod group get a place, or none does.

When the first member of a gang reaches filter and at least min-member members exist (from the
pod watch), every member without a place is planned at once on a fork (`vgpu.core.gang.plan`),
each only on the nodes its own nodeSelector, required node affinity and tolerations allow
(`vgpu.api.nodefit`): kube-scheduler asks about each member only the nodes its filters pass.
If the cluster cannot hold them all, nothing is reserved and every member says why. If it can,
every member's place is *reserved* in the ledger with one deadline. The first gang to plan wins
its capacity whole; a competing gang is planned against what is left, fails whole and is retried
on its next filter, so two gangs never hold parts of each other's room (no deadlock).

Binding is delayed: a member's bind waits until min-member members have either been through
filter on their reserved node or are already bound or being bound. The gang timeout governs the
wait for members to appear and pass filter: reservations that reach it with no member bound are
released in full. Once a member is bound (or being bound) the gang is all-or-nothing from its
first bind to its last: the deadline no longer releases the reservations of the members it still
needs to reach min-member, which are kept until each binds; each gets one `VgpuGangIncomplete`
Event (`take_events`, sent by the daemon) saying why. Members past min-member are not needed to
run: their reservations are released at the deadline, and planned again on their next filter
(else a gang of one with a second member kube-scheduler never sends held its place for good, and
a reservation, not being a pod, cannot be preempted). Deleting a member before any is bound abandons the reservations.
A plan that fails after taking long (a gang of thousands of members, which costs about members
x nodes on the loop every filter waits on) is not tried again for `BACKOFF_FACTOR` times its
duration: its members are answered with its reason meanwhile, so no gang can take more than about
a tenth of the extender's time by having its members retried. Cheap plans are always retried.
Every public method takes the cache's (re-entrant) lock itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import RLock
from typing import Concatenate, NamedTuple, ParamSpec, TypeVar

from vgpu.api.podspec import GangLabel
from vgpu.core import gang as gang_planning
from vgpu.core.ids import GangKey, PodKey
from vgpu.core.model import Assignment, GangRef, Holding, Phase, PodRequest
from vgpu.core.queues.whole_gpus import NO_KEEP, Keep
from vgpu.core.scheduler import Scheduler
from vgpu.extender.gangs.cache_view import GangCache
from vgpu.extender.gangs.plans import (
    Planner,
    core_planner,
    invalid_member,
    plan_gang,
    stranded_member,
    unplaced_members,
)

log = logging.getLogger(__name__)
_FOREVER = float("inf")
SLOW_PLAN_S = 0.05
"""A failing plan that took this long (seconds) holds the gang's next plan back."""
BACKOFF_FACTOR = 10.0
"""How many times a slow failing plan's duration its gang waits before it is planned again."""
P = ParamSpec("P")
R = TypeVar("R")


class GangEvent(NamedTuple):
    """An Event the daemon records on a member pod (outside the lock: it is an API call)."""

    pod: PodKey
    reason: str
    message: str


def _locked(
    method: Callable[Concatenate[GangCoordinator, P], R],
) -> Callable[Concatenate[GangCoordinator, P], R]:
    """Run a coordinator method under its cache's lock (its state is part of the cache's)."""

    def run(self: GangCoordinator, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    run.__doc__, run.__name__ = method.__doc__, method.__name__
    return run


@dataclass(frozen=True, slots=True)
class GangWait:
    """The member cannot have a place now; `reason` says why (always resolvable)."""

    reason: str


@dataclass(slots=True)
class _Gang:
    deadline: float
    filtered: set[PodKey] = field(default_factory=set)
    size: int | None = None  # min-member when planned (None: unknown, every member is needed)


class GangCoordinator:
    """Plans, reserves, gates binds and expires gangs: the gang part of a `ClusterCache`, which
    makes it, shares its lock with it and tells it of rebuilds and deleted members."""

    def __init__(
        self, cache: GangCache, lock: RLock, *, timeout: float, planner: Planner = core_planner
    ) -> None:
        self._cache = cache
        self._lock = lock
        self._timeout = timeout
        self._planner = planner
        self._gangs: dict[GangKey, _Gang] = {}
        self._failures: dict[GangKey, str] = {}
        self._backoff: dict[GangKey, tuple[float, GangWait]] = {}
        self._events: list[GangEvent] = []

    @_locked
    def reset(self) -> None:
        """Forget every gang (the cache, rebuilt, calls it: its reservations are gone)."""
        self._gangs.clear()
        self._failures.clear()
        self._backoff.clear()

    @_locked
    def place_of(
        self,
        pod: PodRequest,
        label: GangLabel,
        size: int,
        scheduler: Scheduler,
        now: float,
        keep: Keep = NO_KEEP,
    ) -> Assignment | GangWait:
        """The member's reserved (or assumed, or bound) place, planning the gang if needed;
        `keep`: the queues a release pass keeps idle GPUs for (`vgpu.core.queues.whole_gpus`)."""
        ledger = self._cache.ledger
        held = ledger.holding(pod.key)
        if held is not None:
            return held.assignment
        if waiting := self.incomplete(label.key, pod.key, size):
            return waiting
        members = unplaced_members(self._cache, label.key)
        if pod.key not in {m.key for m in members} and pod.key not in self._cache.members.get(
            label.key, set()
        ):
            members.append(pod)
        if problem := invalid_member(self._cache, label.key):
            return GangWait(f"gang {label.key}: {problem}")
        held_back = self._backoff.get(label.key)
        if held_back is not None and now < held_back[0]:
            return held_back[1]
        started = time.perf_counter()
        result = self._plan(scheduler, GangRef(label.key, size), members, keep)
        took = time.perf_counter() - started
        if isinstance(result, GangWait):
            self._failures[label.key] = result.reason
            if took >= SLOW_PLAN_S:
                self._backoff[label.key] = (now + BACKOFF_FACTOR * took, result)
            return result
        self._backoff.pop(label.key, None)
        self._failures.pop(label.key, None)
        self._cache.reserve_gang(result, now + self._timeout)
        self._gangs[label.key] = _Gang(now + self._timeout, size=size)
        log.info("gang %s: reserved %d member(s)", label.key, len(result.assignments))
        mine = result.for_pod(pod.key)
        assert mine is not None
        return mine

    def _plan(
        self, scheduler: Scheduler, ref: GangRef, members: list[PodRequest], keep: Keep = NO_KEEP
    ) -> gang_planning.GangPlan | GangWait:
        """Plan the gang (`vgpu.extender.gangs.plans`), or say why its members must wait."""
        cache = self._cache
        result = plan_gang(
            self._planner, scheduler, ref, members, cache.pods, cache.node_facts, keep
        )
        return GangWait(result) if isinstance(result, str) else result

    @_locked
    def incomplete(self, gang: GangKey, pod: PodKey, size: int) -> GangWait | None:
        """Why the gang cannot be placed yet, if fewer than `size` members exist (`pod`, one of
        them, counted, as `vgpu.core.gang.present` counts them): whatever is evicted, its
        members' filters only wait for the others. The one count `place_of` and preemption
        both read. Or why it never will be: a member not yet bound that no node admits
        (`plans.stranded_member`)."""
        ledger, pods = self._cache.ledger, self._cache.pods

        def bound(key: PodKey) -> bool:
            spec = pods.get(key)
            return spec is not None and bool(spec.node)

        members = self._cache.members.get(gang, set())
        exist = gang_planning.present(pod, members, lambda k: ledger.holding(k) is not None, bound)
        if exist < size:
            return GangWait(f"gang {gang}: waiting for members, {exist} of {size} exist")
        if problem := stranded_member(self._cache, gang):
            return GangWait(f"gang {gang}: {problem}")
        return None

    @_locked
    def restore(
        self, scheduler: Scheduler, size_of: Callable[[GangKey], int | None]
    ) -> list[GangKey]:
        """After a rebuild (restart, new leadership term): reserve again the places of every
        gang with a bound member, whose reservations lived in memory only, before any other pod
        is served; held until each member binds, as `_keep` holds them (else the first pods
        served after a rebuild could take the places its unbound members need).
        A gang that no longer fits says why on its next filter. Returns the gangs restored."""
        restored = []
        for gang in sorted(self._cache.members):
            members = unplaced_members(self._cache, gang)
            claims = any(
                s.claims for k in self._cache.members[gang] if (s := self._cache.pods.get(k))
            )
            if not members or claims or gang in self._gangs or not self.started(gang):
                continue  # claim gangs are held at bind (`vgpu.extender.gangs.claims`)
            ref = GangRef(gang, size_of(gang) or len(self._cache.members[gang]))
            result = self._plan(scheduler, ref, members)
            if isinstance(result, GangWait):
                self._failures[gang] = result.reason
                log.warning("gang %s: half bound, cannot re-reserve: %s", gang, result.reason)
                continue
            self._cache.reserve_gang(result, _FOREVER)
            self._gangs[gang] = _Gang(_FOREVER, size=ref.min_member)
            self._needed(gang)
            restored.append(gang)
            log.info("gang %s: re-reserved %d member(s) after a rebuild", gang, len(members))
        return restored

    @_locked
    def hold(self, assignment: Assignment, gang: GangKey, deadline: float) -> None:
        """Reserve one member's place, already confirmed (a claim member at bind:
        `vgpu.extender.gangs.claims`); the gang's deadline is its first member's."""
        entry = self._gangs.setdefault(gang, _Gang(deadline))
        self._cache.reserve_gang(gang_planning.GangPlan(gang, (assignment,)), entry.deadline)
        entry.filtered.add(assignment.pod)

    @_locked
    def deadline(self, gang: GangKey) -> float | None:
        """When the gang's reservations expire (None: it holds none)."""
        entry = self._gangs.get(gang)
        return None if entry is None else entry.deadline

    @_locked
    def tell(self, event: GangEvent) -> None:
        """Queue an Event for the daemon to record."""
        self._events.append(event)

    @_locked
    def filtered(self, gang: GangKey, pod: PodKey) -> None:
        """A member passed filter on its reserved node."""
        entry = self._gangs.get(gang)
        if entry is not None:
            entry.filtered.add(pod)

    @_locked
    def ready(self, gang: GangKey, size: int) -> bool:
        """Whether min-member members have their place confirmed (filtered, bound or binding)."""
        entry = self._gangs.get(gang)
        ledger = self._cache.ledger
        ready = 0
        for key in self._cache.members.get(gang, set()):
            held = ledger.holding(key)
            if held is None:
                continue
            if held.phase is not Phase.RESERVED or (entry is not None and key in entry.filtered):
                ready += 1
        return ready >= size

    @_locked
    def abandon(self, gang: GangKey, why: str) -> list[PodKey]:
        """Release every reservation of the gang."""
        released = self._cache.release_gang(gang)
        self._gangs.pop(gang, None)
        if released:
            log.info("gang %s: released %d reservation(s): %s", gang, len(released), why)
        return released

    @_locked
    def started(self, gang: GangKey) -> bool:
        """Whether a member is bound or being bound: from then on the gang is kept whole."""
        ledger = self._cache.ledger
        for key in self._cache.members.get(gang, set()):
            held = ledger.holding(key)
            if held is not None and held.phase is not Phase.RESERVED:
                return True
        return False

    @_locked
    def expire(self, now: float) -> list[GangKey]:
        """Release gangs whose reservations passed their deadline with no member bound; returns
        them. A gang with a bound member keeps the others' reservations (`_keep`)."""
        due = {h.gang for h in self._cache.ledger.expired(now) if h.gang is not None}
        due |= {k for k, g in self._gangs.items() if g.deadline <= now}
        released = []
        for gang in sorted(due):
            if self.started(gang):
                self._keep(gang)
            else:
                self.abandon(gang, "reservation expired")
                released.append(gang)
        return released

    def _needed(self, gang: GangKey) -> list[Holding]:
        """The reservations the started gang still needs to reach min-member (those of members
        kube-scheduler has sent through filter first); the others are released."""
        ledger = self._cache.ledger
        entry = self._gangs.get(gang)
        held = [h for k in sorted(self._cache.members.get(gang, set())) if (h := ledger.holding(k))]
        reserved = [h for h in held if h.phase is Phase.RESERVED]
        if entry is None or entry.size is None:
            return reserved
        filtered = entry.filtered
        reserved.sort(key=lambda h: h.assignment.pod not in filtered)
        need = max(0, entry.size - (len(held) - len(reserved)))
        for extra in reserved[need:]:
            self._cache.release(extra.assignment.pod)
            log.info(
                "gang %s: %s is past min-member: reservation released", gang, extra.assignment.pod
            )
        return reserved[:need]

    def _keep(self, gang: GangKey) -> None:
        """Past the deadline with members bound: hold those still needed until they bind, and
        say so."""
        entry = self._gangs.setdefault(gang, _Gang(_FOREVER))
        entry.deadline = _FOREVER
        waiting = []
        for held in self._needed(gang):
            self._cache.extend_reservation(held.assignment.pod, _FOREVER)
            waiting.append((held.assignment.pod, held.assignment.node))
        bound = sum(
            1
            for k in self._cache.members.get(gang, set())
            if (h := self._cache.ledger.holding(k)) is not None and h.phase is not Phase.RESERVED
        )
        for key, node in waiting:
            message = (
                f"gang {gang}: {bound} member(s) bound but this one not within the gang timeout; "
                f"its place on node {node} stays reserved until it binds (delete the gang's pods "
                "to give the places back)"
            )
            log.warning("%s", message)
            self._events.append(GangEvent(key, "VgpuGangIncomplete", message))

    @property
    def events(self) -> tuple[GangEvent, ...]:
        """The Events not yet taken (read-only)."""
        return tuple(self._events)

    @_locked
    def take_events(self) -> list[GangEvent]:
        """The Events to record since the last call."""
        events, self._events = self._events, []
        return events

    @_locked
    def member_gone(self, pod: PodKey, gang: GangKey | None) -> None:
        """A member was deleted: a gang still waiting to bind gives its reservations back (a
        started gang keeps them: its other members are bound and wait for theirs); a gang with
        no member left is no longer unplaceable (its gauge once outlived it)."""
        if gang is not None and gang in self._gangs and not self.started(gang):
            self.abandon(gang, f"member {pod} was deleted")
        if gang is not None and gang not in self._cache.members:
            self._failures.pop(gang, None)
            self._backoff.pop(gang, None)

    @_locked
    def counts(self) -> dict[str, int]:
        """Gangs by state, for metrics: only gangs with members count (the gauges follow the
        gangs' pods)."""
        unplaceable = sum(1 for gang in self._failures if gang in self._cache.members)
        return {"reserved": len(self._gangs), "unplaceable": unplaceable}
