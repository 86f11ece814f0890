"""Where a waiting pod, or its whole gang, could go if it were placed now. Pure: no I/O.

Answered by the scheduling core itself, never a second placement: a `ClusterState` is built
from the snapshot as the extender builds its own (each node through `vgpu.api.nodespec`, each
bound pod's assignment charged as the report reads it) and `vgpu.core.gang.plan` places the
pod's waiting gang members, or the pod alone, with the extender's default policy: the planning
the extender runs for a gang, all members or none, and for a lone pod its `select`. So the
answer is the GPUs vgpu's placement would pick among the Ready nodes the snapshot shows, or the
core's own words for why nothing fits. Not modelled: what the kube-scheduler filters before
the extender (taints, selectors, affinity, cordons), a policy other than the default
(`--policy`, `vgpu.io/policy`), and places reserved for other gangs that are not bound yet.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.nodespec import node_spec
from vgpu.api.podspec import PodSpec, key_of, pod_spec
from vgpu.api.resources import ResourceNames
from vgpu.core import gang
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import GangKey, NodeName
from vgpu.core.model import Assignment
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.units import DEFAULT_MEMORY_UNIT_MIB
from vgpu.core.workload import DEFAULT_WORKLOAD
from vgpu.inspect.pods import pod_facts
from vgpu.inspect.snapshot import Snapshot

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Where:
    """The planned assignment of each waiting member (the pod alone when in no gang), or
    `reason` ("" when everything fits) and nothing planned."""

    assignments: tuple[Assignment, ...]
    reason: str = ""
    gang: str = ""


def where_now(
    snapshot: Snapshot, names: ResourceNames, pod: str, ready: Iterable[str]
) -> Where | None:
    """Where `pod` (`ns/name`) and its waiting gang mates would go on the `ready` nodes; None
    when the snapshot has no such pod waiting, or the pod cannot be read (the report says why)."""
    return Placer(snapshot, names, ready).where(pod)


class Placer:
    """One snapshot's cluster state, built at the first question and kept: reading every pod
    and node is most of the cost (1.4 to 1.7 s for 1,000 nodes and 7,000 pods on a loaded
    2-core machine), the planning little. Each plan runs on a fork that is reverted, so the
    state is the same after every question; the lock keeps two pages' plans apart."""

    def __init__(self, snapshot: Snapshot, names: ResourceNames, ready: Iterable[str]) -> None:
        self._snapshot, self._names, self._ready = snapshot, names, tuple(ready)
        self._lock = threading.Lock()
        self._built: tuple[list[tuple[str, PodSpec]], Scheduler] | None = None

    def where(self, pod: str) -> Where | None:
        with self._lock:
            if self._built is None:
                specs = _specs(self._snapshot.pods, self._names)
                state = _state(self._snapshot, self._names, specs, self._ready)
                self._built = specs, Scheduler(state, make_policy("default", DEFAULT_WORKLOAD))
            specs, scheduler = self._built
            return _plan(specs, scheduler, pod)


def _plan(specs: list[tuple[str, PodSpec]], scheduler: Scheduler, pod: str) -> Where | None:
    spec = next((s for k, s in specs if k == pod), None)
    if spec is None or spec.node or spec.terminal:
        return None
    key = spec.gang.key if spec.gang is not None else GangKey(pod)
    members = [s.request for _, s in specs if _waiting_with(s, spec)]
    planned = gang.plan(scheduler, key, members)
    name = "" if spec.gang is None else str(key)
    if isinstance(planned, gang.GangFailure):
        reason = str(planned) if spec.gang is not None else planned.reason
        return Where((), reason, name)
    return Where(planned.assignments, "", name)


def _specs(pods: Iterable[Obj], names: ResourceNames) -> list[tuple[str, PodSpec]]:
    out = []
    for o in pods:
        obj = dict(o)
        try:
            out.append((str(key_of(obj)), pod_spec(obj, memory_unit_mib=DEFAULT_MEMORY_UNIT_MIB,
                                                   names=names)))  # fmt: skip
        except InvalidRequest:
            continue  # unreadable: it holds nothing, as in the extender
    return out


def _waiting_with(s: PodSpec, spec: PodSpec) -> bool:
    """`s` waits to be placed together with `spec`: itself, or a waiting member of its gang."""
    if s.node or s.terminal:
        return False
    if spec.gang is None:
        return s is spec
    return s.gang is not None and s.gang.key == spec.gang.key


def _state(
    snapshot: Snapshot, names: ResourceNames, specs: list[tuple[str, PodSpec]],
    ready: Iterable[str],
) -> ClusterState:  # fmt: skip
    """The Ready nodes, each bound pod's holding charged (its assignment, else its CPU and
    memory alone, as the extender counts a pod without one). A holding the node cannot count
    whole still holds its GPU shares: the view never offers a GPU a bound pod holds."""
    up = set(ready)
    state = ClusterState(
        n.node for n in (node_spec(dict(o), names) for o in snapshot.nodes) if n.node.name in up
    )
    bound = {str(key_of(dict(o))): o for o in snapshot.pods}
    for key, s in specs:
        if not s.node or s.terminal or not state.has_node(NodeName(s.node)):
            continue
        facts = pod_facts(bound[key], names)
        a = facts.assignment
        if a is None or a.node != s.node:
            r = s.request
            a = Assignment(r.key, NodeName(s.node), r.cpu_milli, r.memory_mib, (), r.uid)
        for charged in (a, dataclasses.replace(a, cpu_milli=0, memory_mib=0)):
            if state.can_charge(charged) is None:  # its GPUs are held even where its CPU
                state.charge(charged)  # does not fit what the node offers: never offer them
                break
    return state
