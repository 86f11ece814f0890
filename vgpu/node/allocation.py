"""The allocation decision port of the device plugin, and a default binpacking implementation.

The kubelet adapter asks an `AllocationPolicy` two questions: which device IDs it would like
for a container (GetPreferredAllocation, advisory) and whether the IDs the kubelet finally
picked are acceptable (Allocate, binding). The default policy:

- preferred: the lowest-numbered units on the single GPU with the fewest free units that still
  fits (binpacking); requests larger than one GPU take whole free GPUs first.
- allocate: every ID must be a known unit of this resource; a request that spans several GPUs
  must take every unit of each of those GPUs (only whole GPUs can be combined), otherwise the
  share is refused, because a fraction split over GPUs can't be enforced. The grant is the
  mode's (`vgpu.node.unassigned`): an enforcing mode enforces here too.

Pure: no I/O; GPUs are passed in at construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from vgpu.node.devices import (
    DEFAULT_MEMORY_UNIT_MIB,
    DeviceIdError,
    ResourceNames,
    UnitId,
    UnitKind,
    group_by_gpu,
    split_by_gpu,
    units_per_gpu,
)
from vgpu.node.grants import ContainerGrant, GrantSettings, Refusal
from vgpu.node.model import GpuInfo
from vgpu.node.unassigned import unassigned_grant


class AllocationPolicy(Protocol):
    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        """`size` IDs from `available` including all of `must_include` (advisory)."""
        ...

    def allocate(
        self, resource: str, container_ids: Sequence[Sequence[str]]
    ) -> list[ContainerGrant] | Refusal:
        """One grant per container, in order, or a refusal for the whole request."""
        ...


class ClosedPolicy:
    """Refuses every Allocate: the agent has no verified assignment source (no cluster
    credentials) and was not told `--allow-unassigned`, so it cannot know whose devices these
    are. Fail closed: a refused pod is recreated by its controller; a silent swap is not seen."""

    def __init__(self, why: str, default: AllocationPolicy) -> None:
        self._why = why
        self._default = default

    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        return self._default.preferred(resource, available, must_include, size)

    def allocate(
        self, resource: str, container_ids: Sequence[Sequence[str]]
    ) -> list[ContainerGrant] | Refusal:
        return Refusal(
            f"{resource}: {self._why}; every Allocate is refused (fail closed). Give the agent "
            "its service account (cluster credentials) or run it with --allow-unassigned"
        )


class DefaultAllocationPolicy:
    def __init__(
        self,
        gpus: Sequence[GpuInfo],
        *,
        names: ResourceNames | None = None,
        memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB,
        settings: GrantSettings | None = None,
    ) -> None:
        self._gpus = {g.uuid: g for g in sorted(gpus, key=lambda g: g.index)}
        self._settings = settings or GrantSettings()
        self._order = {uuid: n for n, uuid in enumerate(self._gpus)}
        self._names = names or ResourceNames()
        self._unit_mib = memory_unit_mib

    def _capacity(self, uuid: str, kind: UnitKind) -> int:
        return units_per_gpu(self._gpus[uuid], kind, self._unit_mib)

    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        kind = self._names.kind_of(resource)
        must = list(dict.fromkeys(must_include))
        taken = set(must)
        pool = {
            uuid: [u for u in units if u not in taken]
            for uuid, units in split_by_gpu(available).items()
            if uuid in self._gpus
        }
        must_gpus = set(split_by_gpu(must))
        rest = size - len(must)
        if rest <= 0:
            return must
        if len(must_gpus) == 1:
            (home,) = must_gpus
            if len(pool.get(home, [])) >= rest:
                return must + pool[home][:rest]
        return must + self._pick(pool, rest, kind)

    def _pick(self, pool: dict[str, list[str]], rest: int, kind: UnitKind) -> list[str]:
        """Best-fit single GPU; else whole free GPUs (or the emptiest GPU) one at a time."""
        picked: list[str] = []
        while rest > 0 and pool:
            fits = [u for u, ids in pool.items() if len(ids) >= rest]
            if fits:
                best = min(fits, key=lambda u: (len(pool[u]), self._order[u]))
                return picked + pool[best][:rest]
            full = [u for u, ids in pool.items() if len(ids) == self._capacity(u, kind)]
            take = full[0] if full else max(pool, key=lambda u: (len(pool[u]), -self._order[u]))
            ids = pool.pop(take)
            picked += ids
            rest -= len(ids)
        return picked

    def allocate(
        self, resource: str, container_ids: Sequence[Sequence[str]]
    ) -> list[ContainerGrant] | Refusal:
        try:
            kind = self._names.kind_of(resource)
        except ValueError as e:
            return Refusal(str(e))
        grants = []
        for n, ids in enumerate(container_ids):
            grant = self._grant(kind, ids)
            if isinstance(grant, Refusal):
                return Refusal(f"{resource} container request {n}: {grant.reason}")
            grants.append(grant)
        return grants

    def _grant(self, kind: UnitKind, ids: Sequence[str]) -> ContainerGrant | Refusal:
        if not ids:
            return Refusal("no device IDs")
        if len(set(ids)) != len(ids):
            return Refusal("duplicate device IDs")
        try:
            groups = group_by_gpu(ids)
        except DeviceIdError as e:
            return Refusal(str(e))
        problem = self._check_units(kind, groups)
        if problem is not None:
            return Refusal(problem)
        shares = [(uuid, len(groups[uuid])) for uuid in self._gpus if uuid in groups]
        return unassigned_grant(kind, shares, self._gpus, self._unit_mib, self._settings)

    def _check_units(self, kind: UnitKind, groups: dict[str, list[UnitId]]) -> str | None:
        for uuid, units in groups.items():
            if uuid not in self._gpus:
                return f"unknown GPU {uuid!r} (not on this node)"
            cap = self._capacity(uuid, kind)
            bad = [str(u) for u in units if u.kind is not kind or u.index >= cap]
            if bad:
                return f"{bad[0]!r} is not a {kind.name.lower()} unit of GPU {uuid}"
            if len(groups) > 1 and len(units) != cap:
                return (
                    f"IDs span {len(groups)} GPUs but take only {len(units)} of {cap} units of "
                    f"{uuid}; a share smaller than a GPU must be on one GPU, and several GPUs "
                    f"can only be combined whole"
                )
        return None
