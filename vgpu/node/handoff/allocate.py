"""`HandoffPolicy`: the `AllocationPolicy` that admits exactly what the extender assigned.

- GetPreferredAllocation: the first pending container (see `Handoff.candidates`) asking `size`
  devices of this resource names the GPU(s) (with none, an unsure attribution's: see below); the
  answer is `size` available IDs there, must-include IDs first. With no match it re-lists the
  node's pods once (the kubelet's watch may be ahead of ours); still none, or too few IDs
  available there, it falls back to the default binpacked choice. The call is judged on one
  answer of the ledger (`Handoff.steering`), asked again only after the re-list.
- Allocate: the GPUs are read from the IDs. A pending container asking `len(ids)` devices on
  exactly those GPUs is admitted and its grant returned (cores: the full grant from the
  assignment; memory: an acknowledgement, the limits came with cores). Before a miss is
  refused, and before a call surely starts a pod's admission, the node's pods are re-listed
  (a twin the watch has not shown may be the caller: `_match`). Each container of a call is
  judged on one answer of the ledger (`Handoff.attribution`, read in one hold of its lock, so
  the pod watch cannot change it between the answer's parts), asked again only after a
  re-list. When another pod waits
  with a container confusable with it (`vgpu.core.handoff_rule`), the call is refused rather
  than guessed; interchangeable ones make the attribution *unsure* (`Handoff.admit`); a call
  matching nothing may take back an unsure attribution (`Handoff.attribution`). Otherwise it is
  refused with what the ledger holds there, and the pod part-way through admission that made
  it is marked failed (`Handoff.abort_admissions`). With `allow_unassigned`, IDs matching no
  pending container are admitted when their GPU has capacity no assigned pod holds.

Every admission calls `on_admit(pod)` so the agent can patch `vgpu.io/admitted`. Pure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from vgpu.core.handoff_rule import confusable
from vgpu.core.ids import PodKey
from vgpu.core.kubelet_reuse import Role
from vgpu.core.units import MMIB_PER_MIB
from vgpu.node.allocation import DefaultAllocationPolicy
from vgpu.node.container_dirs import DirOwner
from vgpu.node.devices import (
    DeviceIdError,
    ResourceNames,
    UnitId,
    UnitKind,
    group_by_gpu,
    split_by_gpu,
    units_per_gpu,
)
from vgpu.node.grants import (
    ContainerGrant,
    GpuLimit,
    GrantSettings,
    Refusal,
    container_grant,
    memory_ack_grant,
)
from vgpu.node.handoff.admissions import Attribution, Candidate, Handoff
from vgpu.node.model import GpuInfo

log = logging.getLogger(__name__)
_NOUN = {UnitKind.CORES: "cores", UnitKind.MEMORY: "memory blocks"}
_CAUGHT_UP = (
    "%s: %s of %d devices matched %s only after re-listing this node's pods (the kubelet's "
    "watch showed the bind before ours)"
)


class HandoffPolicy:
    def __init__(
        self,
        handoff: Handoff,
        gpus: Sequence[GpuInfo],
        *,
        names: ResourceNames | None = None,
        memory_unit_mib: int,
        settings: GrantSettings | None = None,
        allow_unassigned: bool = False,
        unassigned_refused: str = "unassigned pods are not admitted (--allow-unassigned is off)",
        on_admit: Callable[[PodKey], None] = lambda _pod: None,
        refresh: Callable[[], None] = lambda: None,
    ) -> None:
        self._handoff = handoff
        self._gpus = {g.uuid: g for g in sorted(gpus, key=lambda g: g.index)}
        self._names = names or ResourceNames()
        self._unit_mib = memory_unit_mib
        self._settings = settings or GrantSettings()
        self._allow_unassigned = allow_unassigned
        self._unassigned_refused = unassigned_refused  # why, when not allowed
        self._on_admit = on_admit
        self._refresh = refresh
        self._default = DefaultAllocationPolicy(
            gpus, names=self._names, memory_unit_mib=memory_unit_mib, settings=self._settings
        )

    # ----- GetPreferredAllocation ----------------------------------------------------------------
    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        kind = self._names.kind_of(resource)
        answer = self._handoff.steering(kind, size)
        if not answer.pending:
            # The kubelet learns of a bound pod through its own watch and asks for its
            # preference before Allocate (pkg/kubelet/cm/devicemanager/manager.go,
            # `devicesToAllocate`): catch up now, or binpacking steers the call to a GPU the
            # extender did not choose and the Allocate that follows must be refused.
            self._refresh()
            answer = self._handoff.steering(kind, size)
            if answer.pending:
                log.info(
                    _CAUGHT_UP, resource, "GetPreferredAllocation", size, answer.pending[0].pod
                )
        tried = answer.tried
        for candidate in tried:
            ids = self._steer(kind, candidate, available, must_include, size)
            if ids is not None:
                return ids
        ids = self._default.preferred(resource, available, must_include, size)
        if tried:
            self._short_offer(resource, kind, tried[0], available, size)
        else:
            log.info(
                "%s: preferred %d devices for no pending container: binpacked on %s",
                resource,
                size,
                sorted(split_by_gpu(ids)),
            )
        return ids

    def _short_offer(
        self,
        resource: str,
        kind: UnitKind,
        candidate: Candidate,
        available: Sequence[str],
        size: int,
    ) -> None:
        """Say why steering failed: the kubelet does not offer the devices the assignment names.
        It withholds devices it believes allocated; after a kubelet restart those include pods
        deleted before it, until its pod sources have synced (pkg/kubelet/kubelet.go marks a
        source ready only after handling its first update; pkg/kubelet/cm/devicemanager/
        manager.go `UpdateAllocatedDevices` frees nothing before that)."""
        offered = split_by_gpu(available)
        short = ", ".join(
            f"{len(offered.get(uuid, []))} of {need} on {uuid}"
            for uuid, need in self._quotas(kind, candidate, size).items()
        )
        log.warning(
            "%s: the kubelet offers %s for %s/%s's assignment (it still counts some of them as "
            "allocated: another container's, or, after a kubelet restart, a pod deleted before "
            "it); the Allocate that follows will be refused",
            resource,
            short,
            candidate.pod,
            candidate.container.name,
        )

    def _steer(
        self,
        kind: UnitKind,
        candidate: Candidate,
        available: Sequence[str],
        must: Sequence[str],
        size: int,
    ) -> list[str] | None:
        quotas = self._quotas(kind, candidate, size)
        picked = list(dict.fromkeys(must))
        taken = set(picked)
        prefixes = tuple(f"{uuid}::" for uuid in quotas)
        pool = split_by_gpu(i for i in available if i.startswith(prefixes) and i not in taken)
        for uuid, units in split_by_gpu(picked).items():
            if uuid in quotas:
                quotas[uuid] -= len(units)
        for uuid, need in quotas.items():
            free = pool.get(uuid, [])[: max(need, 0)]
            if len(free) < need:
                return None
            picked += free
        return picked if len(picked) == size else None

    def _quotas(self, kind: UnitKind, candidate: Candidate, size: int) -> dict[str, int]:
        shares = candidate.shares
        if kind is UnitKind.CORES:
            return {s.uuid: s.cores for s in shares}
        per, extra = divmod(size, len(shares))
        return {s.uuid: per + (1 if n < extra else 0) for n, s in enumerate(shares)}

    # ----- Allocate ------------------------------------------------------------------------------
    def allocate(
        self, resource: str, container_ids: Sequence[Sequence[str]]
    ) -> list[ContainerGrant] | Refusal:
        try:
            kind = self._names.kind_of(resource)
        except ValueError as e:
            return Refusal(str(e))
        grants: list[ContainerGrant] = []
        done: list[tuple[PodKey, str]] = []
        for ids in container_ids:
            result = self._one(kind, resource, ids)
            if isinstance(result, Refusal):
                for pod, container in done:
                    self._handoff.unadmit(pod, container, kind)
                for pod in self._handoff.abort_admissions(kind, len(ids)):
                    log.warning("%s: the kubelet fails the admission of %s", resource, pod)
                return result
            grant, admitted = result
            grants.append(grant)
            if admitted is not None:
                done.append(admitted)
        for pod in dict.fromkeys(p for p, _ in done):
            self._on_admit(pod)
        return grants

    def _one(
        self, kind: UnitKind, resource: str, ids: Sequence[str]
    ) -> tuple[ContainerGrant, tuple[PodKey, str] | None] | Refusal:
        if not ids or len(set(ids)) != len(ids):
            return Refusal(f"{resource}: empty or duplicate device IDs")
        try:
            groups = group_by_gpu(ids)
        except DeviceIdError as e:
            return Refusal(str(e))
        unknown = [u for u in groups if u not in self._gpus]
        if unknown:
            return Refusal(f"{resource}: unknown GPU {unknown[0]} (not on this node)")
        gpus = frozenset(groups)
        answer = self._match(kind, resource, len(ids), gpus)
        chosen = answer.chosen
        if chosen is None:
            return self._unmatched(kind, resource, ids, groups, answer)
        ambiguous = _ambiguity(answer, chosen)
        if ambiguous is not None:
            return Refusal(
                f"{resource}: {len(ids)} devices on {', '.join(sorted(gpus))}: {ambiguous}"
            )
        # Another pod's container with this ask on these GPUs (same grant: invariant I) could
        # have made the call: the attribution is unsure.
        grant = self._grant(kind, chosen, groups, sure=not answer.unsure)
        if isinstance(grant, Refusal):
            return grant
        self._handoff.admit(chosen.pod, chosen.container.name, kind, ids, unsure=answer.unsure)
        log.info(
            "%s: admitted %s/%s on %s", resource, chosen.pod, chosen.container.name, sorted(gpus)
        )
        return grant, (chosen.pod, chosen.container.name)

    def _match(self, kind: UnitKind, resource: str, size: int, gpus: frozenset[str]) -> Attribution:
        """The ledger's answer (`Handoff.attribution`) for an Allocate of `size` devices of
        `kind` on `gpus`, read from a view of the node's pods as new as the kubelet's wherever
        the answer depends on it.

        The kubelet learns of a bound pod through its own watch and may admit it before ours
        has shown it (pkg/kubelet/config/apiserver.go; pkg/kubelet/kubelet.go
        `HandlePodAdditions`). With no pending container matching, the agent catches up with
        the API server once and asks again. On a match that would *surely* start a pod's
        admission it catches up too: a twin we do not see yet (same ask, GPU and grant:
        invariant I lets both wait) may be the caller, and a sure attribution would report the
        wrong pod admitted, or fail it with its twin when the twin's next call is refused. The
        kubelet only admits pods it has seen bound, so after the re-list every pod it may be
        admitting is in the ledger.
        """
        answer = self._handoff.attribution(kind, size, gpus)
        if answer.pending is not None and not answer.sure_start:
            return answer
        self._refresh()
        again = self._handoff.attribution(kind, size, gpus)
        if answer.pending is None and again.pending is not None:
            log.info(_CAUGHT_UP, resource, "Allocate", size, again.pending.pod)
        return again

    def _grant(
        self, kind: UnitKind, chosen: Candidate, groups: dict[str, list[UnitId]], *, sure: bool
    ) -> ContainerGrant | Refusal:
        order = [u for u in self._gpus if u in groups]
        if kind is UnitKind.MEMORY:
            return memory_ack_grant([(u, len(groups[u])) for u in order])
        by_uuid = {str(s.uuid): s for s in chosen.shares}
        limits = [
            GpuLimit(u, by_uuid[u].cores, -(-by_uuid[u].memory_mmib // MMIB_PER_MIB)) for u in order
        ]
        limit, problem = chosen.cores_limit
        if problem is not None:
            return Refusal(problem)
        owner = _owner(chosen, sure)
        return container_grant(limits, self._settings, cores_limit=limit, owner=owner)

    def _unmatched(
        self,
        kind: UnitKind,
        resource: str,
        ids: Sequence[str],
        groups: dict[str, list[UnitId]],
        answer: Attribution,
    ) -> tuple[ContainerGrant, None] | Refusal:
        if self._allow_unassigned:
            short = self._short_of(kind, groups)
            if short is None:
                result = self._default.allocate(resource, [ids])
                if isinstance(result, Refusal):
                    return result
                log.warning("%s: admitted unassigned container on %s", resource, sorted(groups))
                return result[0], None
            reason = short
        else:
            reason = self._unassigned_refused
        held = answer.held_there
        where = ", ".join(sorted(groups))
        holds = "; ".join(held[:5]) if held else "nothing assigned there"
        if len(held) > 5:
            holds += f"; and {len(held) - 5} more"
        elsewhere = [
            f"{c.pod}/{c.container.name} on {', '.join(sorted(c.gpus))}" for c in answer.waiting
        ]
        if elsewhere:  # the kubelet did not take the devices the assignment names
            reason = f"pending with this ask elsewhere: {'; '.join(elsewhere[:3])}; " + reason
        return Refusal(
            f"{where}: no pending container asks {len(ids)} {_NOUN[kind]} there "
            f"(the ledger holds: {holds}); {reason}. The pod must be scheduled by the vgpu "
            "extender; it will be recreated by its controller"
        )

    def _short_of(self, kind: UnitKind, groups: dict[str, list[UnitId]]) -> str | None:
        for uuid, units in groups.items():
            cap = units_per_gpu(self._gpus[uuid], kind, self._unit_mib)
            free = cap - self._handoff.reserved(uuid, kind, self._unit_mib)
            if len(units) > free:
                return f"only {max(free, 0)} unreserved {kind.name.lower()} devices on {uuid}"
        return None


def _ambiguity(answer: Attribution, chosen: Candidate) -> str | None:
    """Why this Allocate might be for another pod than `chosen` (None: it cannot be).

    Any other pod waiting with a container confusable with `chosen` (the hand-off rule,
    `vgpu.core.handoff_rule`: same ask, another GPU or another grant) or without a valid
    assignment makes the call ambiguous: refuse, never swap. Being part-way through its
    admission does not make `chosen` certain: its admission may have failed elsewhere.
    """
    mine = chosen.pending
    rivals = [c.pod for c in answer.waiting if confusable(mine, c.pending) is not None]
    rivals += answer.unassigned
    if not rivals:
        return None
    return (
        f"could be for {chosen.pod} or for {', '.join(sorted(set(rivals)))}, which wait with "
        f"the same ask and a different or no assignment; refusing rather than risk a swap "
        "(the pod will be recreated)"
    )


def _owner(chosen: Candidate, sure: bool) -> DirOwner:
    """Whose container the grant's directory serves; a regular init container may share its
    pod's directory only when no other pod's container may have made the call."""
    namespace = chosen.pod.split("/", 1)[0]
    shared = sure and chosen.container.role is Role.INIT
    return DirOwner(namespace, chosen.uid or "-", chosen.container.name, shared_init=shared)
