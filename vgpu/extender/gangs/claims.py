"""Gangs whose members get their devices from ResourceClaims (DRA): all or nothing, at bind.

The extender cannot plan such members: kube-scheduler's DRA allocator chooses their devices
from ResourceSlices the extender does not read. So the allocator keeps the choice and the
extender keeps the all-or-nothing part, the way a Permit stage would:

* filter: once min-member members exist, a claim member passes every node kube-scheduler sent,
  i.e. those where the allocator found devices for its claims, counting the in-flight
  allocations of the members already through (kube-scheduler's DRA plugin holds them from
  Reserve on). A member holding a place is sent back to it: its claims are allocated there.
* bind: kube-scheduler calls the extender's bind after the DRA plugin's PreBind has written the
  claims' allocation (`pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`
  in Kubernetes 1.37: PreBind, then the binding). The member's place (its node, CPU only) is
  reserved under the gang as confirmed, and the bind waits, as every gang member's does, until
  min-member members are confirmed or bound; otherwise it fails resolvably and kube-scheduler
  retries it, keeping its claims' allocation (its Unreserve drops only `reservedFor`).
* A gang that reaches the gang timeout with no member bound gives its places back, and each
  member gets a `VgpuGangIncomplete` Event naming the members that never reached binding
  (their own PodScheduled condition says why: the allocator found no devices for them).

So no member is bound unless min-member members have their devices allocated. What the
extender cannot give here is the device-plugin planner's guarantee against two gangs each
holding part of the other's room: claims allocated to waiting members stay allocated until a
member is deleted (docs/dra.md, Gangs). A member is a claim member when it names ResourceClaims
and asks no `vgpu.io` limits; a gang mixing claim members with members the extender places is
refused with that reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from vgpu.api.podspec import PodSpec
from vgpu.core.fit import Verdict
from vgpu.core.ids import GangKey, PodKey
from vgpu.core.model import Assignment
from vgpu.extender.gangs.cache_view import GangCache
from vgpu.extender.gangs.coordinator import GangCoordinator, GangEvent, GangWait

log = logging.getLogger(__name__)
Placer = Callable[[], "Assignment | Verdict"]
"""The member's fresh (CPU-only) place on the node it is bound to."""


def is_claim_member(spec: PodSpec) -> bool:
    """A gang member whose devices come from ResourceClaims only."""
    return spec.gang is not None and spec.claims and not spec.request.wants_gpu


class ClaimGangs:
    """The all-or-nothing gate for gangs of claim members, over the coordinator's ledger: part
    of a `ClusterCache`, which makes it and calls it under its lock."""

    def __init__(self, cache: GangCache, gangs: GangCoordinator, timeout: float) -> None:
        self.cache = cache
        self.gangs = gangs
        self._timeout = timeout
        self._seen: set[GangKey] = set()

    def mixed(self, gang: GangKey) -> str | None:
        """Why the gang cannot be placed as one, if it mixes the two kinds of members."""
        kinds = {is_claim_member(s) for s in self._specs(gang)}
        if len(kinds) < 2:
            return None
        return (
            f"gang {gang} mixes members with ResourceClaims (placed by kube-scheduler's DRA "
            "allocator) and members with vgpu.io limits (placed by the vgpu extender): give "
            "all members of one gang the same kind of GPU request"
        )

    def place_of(self, spec: PodSpec, size: int) -> Assignment | GangWait | None:
        """The member's held place, why it must wait, or None (any node kube-scheduler sent)."""
        assert spec.gang is not None
        gang = spec.gang.key
        held = self.cache.holding(spec.request.key)
        if held is not None:
            return held.assignment
        if problem := self.mixed(gang):
            return GangWait(problem)
        return self.gangs.incomplete(gang, spec.request.key, size)

    def arrive(self, spec: PodSpec, node: str, place: Placer, now: float) -> str | None:
        """The member reached bind on `node` (its claims are allocated there): hold its place
        as confirmed (`place` makes it, CPU only). Returns why not, if it cannot be held."""
        assert spec.gang is not None
        gang, key = spec.gang.key, spec.request.key
        if problem := self.mixed(gang):
            return problem
        held = self.cache.holding(key)
        if held is not None and held.assignment.node != node:
            if self.gangs.started(gang):
                return f"pod {key} is reserved on node {held.assignment.node}, not {node}"
            self.cache.release(key)  # its claims were deallocated and allocated elsewhere
            held = None
        if held is not None:
            self.gangs.filtered(gang, key)
        else:
            placed = place()
            if isinstance(placed, Verdict):
                return f"pod {key} does not fit node {node}: {placed}"
            self.gangs.hold(placed, gang, now + self._timeout)
            log.info("gang %s: claim member %s reached bind on node %s", gang, key, node)
        self._seen.add(gang)
        return None

    def expire(self, now: float) -> list[GangKey]:
        """Give back the places of claim gangs past their deadline with no member bound, and
        tell every member why (before the coordinator's own sweep, which would do it
        silently). Returns the gangs released."""
        released = []
        for gang in sorted(self._seen):
            deadline = self.gangs.deadline(gang)
            if deadline is None or self.gangs.started(gang):
                self._seen.discard(gang)  # released, rebuilt, or kept whole by the coordinator
                continue
            if deadline > now:
                continue
            self._tell_incomplete(gang)
            self.gangs.abandon(gang, "reservation expired")
            self._seen.discard(gang)
            released.append(gang)
        return released

    def _tell_incomplete(self, gang: GangKey) -> None:
        members = sorted(self.cache.members.get(gang, set()))
        at_bind = [k for k in members if self.cache.holding(k) is not None]
        missing = [k for k in members if k not in at_bind]
        message = (
            f"gang {gang}: within the gang timeout only {len(at_bind)} member(s) had their "
            f"ResourceClaims allocated and reached binding, so none is bound; "
            f"{_names(missing)} did not (kube-scheduler found no node with devices for their "
            "claims besides the other members': see their PodScheduled condition); the places "
            "are given back and the gang is tried again"
        )
        for key in members:
            self.gangs.tell(GangEvent(key, "VgpuGangIncomplete", message))

    def _specs(self, gang: GangKey) -> list[PodSpec]:
        specs = (self.cache.pods.get(k) for k in self.cache.members.get(gang, set()))
        return [s for s in specs if s is not None]


def _names(keys: list[PodKey]) -> str:
    if not keys:
        return "the members not created yet"
    shown = ", ".join(keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
