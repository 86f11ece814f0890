"""Gangs (pod groups) as the report shows them: membership, minimum and how far along they are.

A pod joins a gang through any of the conventions vgpu's extender accepts:

* label `scheduling.x-k8s.io/pod-group: NAME` (scheduler-plugins; the minimum is the PodGroup
  object's `spec.minMember`),
* label `pod-group.scheduling.sigs.k8s.io/name: NAME` (or the older bare
  `pod-group.scheduling.sigs.k8s.io`) with `pod-group.scheduling.sigs.k8s.io/min-available`,
* annotation `vgpu.io/gang-name: NAME` with `vgpu.io/gang-size`.

Pure: works on pod dicts and PodGroup dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from vgpu.api.gang import gang_ref
from vgpu.inspect.pods import PodFacts

Obj = Mapping[str, Any]


class GangState(Enum):
    RUNNING = "Running"
    """At least the minimum of members are running."""
    BOUND = "Bound"
    """At least the minimum are bound to nodes; some are still starting."""
    PARTIAL = "Partial"
    """Some but fewer than the minimum are bound: placement in progress, or a member was lost."""
    WAITING = "Waiting"
    """No member bound yet: the gang waits until all of its minimum fit at once."""
    INCOMPLETE = "Incomplete"
    """Fewer pods exist than the minimum: the gang can never start until more are created."""


@dataclass(frozen=True, slots=True)
class GangMembership:
    name: str
    min_member: int | None


@dataclass(frozen=True, slots=True)
class GangView:
    key: str
    min_member: int | None
    members: tuple[str, ...]
    bound: int
    running: int
    nodes: tuple[str, ...]
    state: GangState


def membership(pod: Obj, pod_groups: Mapping[str, int]) -> GangMembership | None:
    """The gang a pod belongs to; `pod_groups` maps `ns/name` to a PodGroup's minMember."""
    meta = pod.get("metadata") or {}
    ref = gang_ref(meta)
    if ref is None:
        return None
    if ref.from_pod_group:
        namespace = str(meta.get("namespace") or "default")
        return GangMembership(ref.name, pod_groups.get(f"{namespace}/{ref.name}"))
    return GangMembership(ref.name, _count(ref.size))


def pod_group_minimums(pod_groups: Iterable[Obj]) -> dict[str, int]:
    """`ns/name` -> spec.minMember of each scheduler-plugins PodGroup object."""
    out = {}
    for group in pod_groups:
        meta = group.get("metadata") or {}
        minimum = _count((group.get("spec") or {}).get("minMember"))
        if minimum is not None:
            out[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = minimum
    return out


def gang_views(members: Iterable[tuple[GangMembership, PodFacts]]) -> tuple[GangView, ...]:
    """Group pods by gang (namespace-scoped) and judge each gang's state."""
    groups: dict[str, list[tuple[GangMembership, PodFacts]]] = {}
    for gang, pod in members:
        groups.setdefault(f"{pod.namespace}/{gang.name}", []).append((gang, pod))
    return tuple(_view(key, groups[key]) for key in sorted(groups))


def _view(key: str, entries: list[tuple[GangMembership, PodFacts]]) -> GangView:
    pods = [p for _, p in entries if not p.terminal]
    minimums = [g.min_member for g, _ in entries if g.min_member is not None]
    minimum = max(minimums) if minimums else None
    bound = sum(1 for p in pods if p.node)
    running = sum(1 for p in pods if p.phase == "Running")
    need = minimum if minimum is not None else len(pods)
    return GangView(
        key=key,
        min_member=minimum,
        members=tuple(sorted(p.key for p in pods)),
        bound=bound,
        running=running,
        nodes=tuple(sorted({p.node for p in pods if p.node})),
        state=_state(len(pods), bound, running, need),
    )


def _state(members: int, bound: int, running: int, need: int) -> GangState:
    if members < need:
        return GangState.INCOMPLETE
    if need and running >= need:
        return GangState.RUNNING
    if need and bound >= need:
        return GangState.BOUND
    return GangState.PARTIAL if bound else GangState.WAITING


def _count(value: object) -> int | None:
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if number >= 1 else None
