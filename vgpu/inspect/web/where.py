"""Where a waiting pod, or its whole gang, could go if it were placed now. Pure: no I/O.

Answered by the scheduling core itself, never a second placement: a `ClusterState` is built
from the snapshot as the extender builds its own (each node through `vgpu.api.nodespec`, each
bound pod's assignment charged as the report reads it) and `vgpu.core.gang.plan` places the
pod's waiting gang members, or the pod alone: the planning the extender runs for a gang, all
members or none, with its default policy, and for a lone pod its `select` with the policy the
pod names (`vgpu.io/policy`, among those allowed), else the default. The policies are the
extender's as the view is told them (`Policies`: its `--policy` and `--allow-pod-policy`),
read through the extender's own `PolicyBook`, so a pod naming one not allowed gets the
extender's refusal. Each member is planned only on the nodes
its nodeSelector, required node affinity and tolerations allow (`vgpu.api.nodefit`, as the
extender's gang planner and queue pass plan it: kube-scheduler never offers it another node),
and a pod, or a member of its gang, that no node of the snapshot admits is told so instead. So
the answer is the GPUs vgpu's placement would pick among the Ready nodes the snapshot shows
that the pod may use, or the core's own words for why nothing fits. Not modelled: places
reserved for other gangs that are not bound yet.

Reading every pod and node is most of the cost, so the parses outlive a read (`Parses`): an
object equal to the one last parsed under its name is not parsed again.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from vgpu.api.nodefit import NO_NODE_ADMITS, NodeFacts, admits_none, allowed_by_pod, node_facts
from vgpu.api.nodespec import NodeSpec, node_spec
from vgpu.api.podspec import PodSpec, pod_spec
from vgpu.api.policies import PolicyBook
from vgpu.api.resources import ResourceNames
from vgpu.core import gang
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import GangKey, NodeName
from vgpu.core.model import Assignment
from vgpu.core.policy.specs import PolicySpec, parse_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.units import DEFAULT_MEMORY_UNIT_MIB
from vgpu.inspect.pods import pod_facts
from vgpu.inspect.snapshot import Snapshot

Obj = Mapping[str, Any]
T = TypeVar("T")
DEFAULT = parse_policy("default")


@dataclass(frozen=True, slots=True)
class Where:
    """The planned assignment of each waiting member (the pod alone when in no gang), or
    `reason` ("" when everything fits) and nothing planned."""

    assignments: tuple[Assignment, ...]
    reason: str = ""
    gang: str = ""
    policy: str = ""
    """The name of the policy the plan was made with."""


@dataclass(frozen=True, slots=True)
class Policies:
    """The extender's policies, as the view is told them: its `--policy` and each
    `--allow-pod-policy` (the chart passes the extender's values)."""

    default: PolicySpec = DEFAULT
    allowed: tuple[PolicySpec, ...] = ()


DEFAULT_POLICIES = Policies()
"""The extender's own defaults: `--policy default`, no pod may name another."""


def where_now(
    snapshot: Snapshot, names: ResourceNames, pod: str, ready: Iterable[str]
) -> Where | None:
    """Where `pod` (`ns/name`) and its waiting gang mates would go on the `ready` nodes; None
    when the snapshot has no such pod waiting, or the pod cannot be read (the report says why)."""
    return Placer(snapshot, names, ready).where(pod)


PodParse = tuple[str, PodSpec | None, Assignment | None]
"""A pod's key, its spec (None: unreadable, it holds nothing) and, bound, its assignment."""
NodeParse = tuple[NodeSpec, NodeFacts]
"""A node's spec and what its labels, taints and cordon let run there (`vgpu.api.nodefit`)."""


class Parses:
    """Each pod's and node's parse, kept from the last read a state was built from with the
    object it was made of. Parsing is a function of the object alone (and the resource
    names, fixed here), so an object equal to the one kept under its name, compared whole,
    parses alike: only new and changed objects are parsed again. At 1,000 nodes and 7,000
    pods that is most of the state's cost (bench/web_view_pod.py). Only the objects of the
    last read built from are kept, so what it holds is bounded by one read."""

    def __init__(self, names: ResourceNames) -> None:
        self.names = names
        self._lock = threading.Lock()
        self._pods: dict[object, tuple[Obj, PodParse]] = {}
        self._nodes: dict[object, tuple[Obj, NodeParse]] = {}

    def read(self, snapshot: Snapshot) -> tuple[list[PodParse], list[NodeParse]]:
        """Every pod's parse and every node's, each reused where its object is unchanged."""
        with self._lock:
            pods, self._pods = _reuse(snapshot.pods, self._pods, self._pod)
            nodes, self._nodes = _reuse(snapshot.nodes, self._nodes, self._node)
        return pods, nodes

    def _pod(self, obj: Obj) -> PodParse:
        spec = _spec(obj, self.names)
        if spec is None:
            return "", None, None
        assignment = None
        if spec.node and not spec.terminal:
            assignment = pod_facts(obj, self.names).assignment
        return str(spec.request.key), spec, assignment

    def _node(self, obj: Obj) -> NodeParse:
        return node_spec(dict(obj), self.names), node_facts(obj)


def _reuse(
    objects: Iterable[Obj], kept: dict[object, tuple[Obj, T]], parse: Callable[[Obj], T]
) -> tuple[list[T], dict[object, tuple[Obj, T]]]:
    """Each object's parse, the kept one where the object kept under its name equals it (the
    name only picks the candidate: equality decides); the new memo holds this read's objects
    only."""
    out, memo = [], {}
    for obj in objects:
        name = _name_of(obj)
        old = kept.get(name)
        parsed = old[1] if old is not None and old[0] == obj else parse(obj)
        memo[name] = (obj, parsed)
        out.append(parsed)
    return out, memo


def _name_of(obj: Obj) -> object:
    """The object's namespace and name where both are text or absent, else None."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    namespace, name = meta.get("namespace"), meta.get("name")
    if isinstance(namespace, (str, type(None))) and isinstance(name, (str, type(None))):
        return namespace, name
    return None


class Placer:
    """One snapshot's cluster state, built at the first question and kept: reading every pod
    and node is most of the cost, the planning little, and `parses` keeps what an earlier
    read parsed. Each plan runs on a fork that is reverted, so the state is the same after
    every question; the lock keeps two pages' plans apart."""

    def __init__(
        self,
        snapshot: Snapshot,
        names: ResourceNames,
        ready: Iterable[str],
        parses: Parses | None = None,
        policies: Policies = DEFAULT_POLICIES,
    ) -> None:
        self._snapshot, self._ready, self._policies = snapshot, tuple(ready), policies
        self._parses = parses if parses is not None and parses.names == names else Parses(names)
        self._lock = threading.Lock()
        self._built: _Built | None = None

    def where(self, pod: str) -> Where | None:
        with self._lock:
            if self._built is None:
                pods, nodes = self._parses.read(self._snapshot)
                specs = [(k, s) for k, s, _ in pods if s is not None]
                state = _state(pods, [n for n, _ in nodes], self._ready)
                facts = {f.name: f for _, f in nodes}
                book = PolicyBook(self._policies.default, self._policies.allowed)
                self._built = specs, state, facts, book  # policies learn: built per read
            return _plan(*self._built, pod)


_Built = tuple[list[tuple[str, PodSpec]], ClusterState, dict[str, NodeFacts], PolicyBook]
"""A read's waiting and bound pods' specs, its Ready nodes' state, every node's facts and the
extender's policies."""


def _plan(
    specs: list[tuple[str, PodSpec]],
    state: ClusterState,
    facts: dict[str, NodeFacts],
    book: PolicyBook,
    pod: str,
) -> Where | None:
    spec = next((s for k, s in specs if k == pod), None)
    if spec is None or spec.node or spec.terminal:
        return None
    name = "" if spec.gang is None else str(spec.gang.key)
    try:  # the extender refuses a pod naming a policy it does not allow, gang or not
        named = book.get(spec.request.policy) if spec.request.policy else book.default
    except InvalidRequest as err:
        return Where((), str(err), name)
    policy = book.default if spec.gang is not None else named  # a gang plans with the default
    key = spec.gang.key if spec.gang is not None else GangKey(pod)
    waiting = [s for _, s in specs if _waiting_with(s, spec)]
    stranded = {t for t in {s.terms for s in waiting} if admits_none(t, facts)}
    for s in sorted(waiting, key=lambda s: str(s.request.key)):
        if s.terms in stranded:  # kube-scheduler never schedules it
            who = "" if spec.gang is None else f"gang {name}: member {s.request.key}: "
            return Where((), who + NO_NODE_ADMITS, name, policy.name)
    terms = {s.request.key: s.terms for s in waiting}
    allowed = allowed_by_pod(terms, facts, state.node_names())
    members = [s.request for s in waiting]
    planned = gang.plan(Scheduler(state, policy), key, members, allowed=allowed)
    if isinstance(planned, gang.GangFailure):
        reason = str(planned) if spec.gang is not None else planned.reason
        return Where((), reason, name, policy.name)
    return Where(planned.assignments, "", name, policy.name)


def _spec(obj: Obj, names: ResourceNames) -> PodSpec | None:
    try:
        return pod_spec(dict(obj), memory_unit_mib=DEFAULT_MEMORY_UNIT_MIB, names=names)
    except InvalidRequest:
        return None  # unreadable: it holds nothing, as in the extender


def _waiting_with(s: PodSpec, spec: PodSpec) -> bool:
    """`s` waits to be placed together with `spec`: itself, or a waiting member of its gang."""
    if s.node or s.terminal:
        return False
    if spec.gang is None:
        return s is spec
    return s.gang is not None and s.gang.key == spec.gang.key


def _state(pods: list[PodParse], nodes: list[NodeSpec], ready: Iterable[str]) -> ClusterState:
    """The Ready nodes, each bound pod's holding charged (its assignment, else its CPU and
    memory alone, as the extender counts a pod without one). A holding the node cannot count
    whole still holds its GPU shares: the view never offers a GPU a bound pod holds."""
    up = set(ready)
    state = ClusterState(n.node for n in nodes if n.node.name in up)
    for _, s, a in pods:
        if s is None or not s.node or s.terminal or not state.has_node(NodeName(s.node)):
            continue
        if a is None or a.node != s.node:
            r = s.request
            a = Assignment(r.key, NodeName(s.node), r.cpu_milli, r.memory_mib, (), r.uid)
        for charged in (a, dataclasses.replace(a, cpu_milli=0, memory_mib=0)):
            if state.can_charge(charged) is None:  # its GPUs are held even where its CPU
                state.charge(charged)  # does not fit what the node offers: never offer them
                break
    return state
