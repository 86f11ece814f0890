"""The extender's view of the cluster, fed by node and pod watches.

One `ClusterState` + `Ledger` holds every node's free capacity and every pod's holding:

* bound pods are *confirmed* with their signed assignment (`vgpu.io/assignment`), or with their
  CPU and memory alone when they have none (a pod without a valid assignment gets no GPU from the
  node agent, so it holds none);
* the bind flow *assumes* pods it is binding, the gang coordinator *reserves* gang members;
* a deleted or finished pod releases its holding at once.

It also indexes what the verbs need: pods by key (parsed once per content), pending containers
per node (invariant I of docs/handshake.md) and gang members, and it owns the gang coordinator
(`vgpu.extender.gangs`) and the bind gate of gangs whose members use ResourceClaims
(`vgpu.extender.claimgangs`), both sharing its lock. It is the one owner of this state and of its lock:
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
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from vgpu.api.admitted import ADMITTED, read_admitted
from vgpu.api.assignment import verify
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.changes import DEFAULT_LIMIT, ChangeFeed
from vgpu.core.errors import InvalidRequest
from vgpu.core.handoff_rule import PendingContainer
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import Assignment, Node, Phase
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState, NodeState
from vgpu.extender.cacheops import CacheOps
from vgpu.extender.claimgangs import ClaimGangs
from vgpu.extender.gangs import GangCoordinator, Planner, core_planner
from vgpu.extender.nodespec import node_spec
from vgpu.extender.podmemo import Notes, Observed, ParsedPods, notes_of
from vgpu.extender.podspec import PodSpec, key_of, pod_spec

log = logging.getLogger(__name__)

Obj = dict[str, Any]
InvalidHook = Callable[[Obj, str], None]
"""(the pod object, what is wrong with it): a watched pod the cache skipped."""
_MALFORMED = (TypeError, AttributeError, ValueError, KeyError, IndexError, RecursionError)
"""What reading an object of the wrong shape raises (a string where a map belongs...)."""


def canonical(assignment: Assignment) -> Assignment:
    """The assignment with containers in name order, as decoding the annotation yields them."""
    return replace(
        assignment, containers=tuple(sorted(assignment.containers, key=lambda c: c.name))
    )


class ClusterCache(CacheOps):
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
        self._unit = memory_unit_mib
        self._names = names
        self._feed_limit = feed_limit
        self._parsed = ParsedPods(self._parse)
        self._gangs = GangCoordinator(self, self._lock, timeout=gang_timeout, planner=planner)
        self._claim_gangs = ClaimGangs(self, self._gangs, gang_timeout)
        self._scheduler = None
        self._on_invalid: InvalidHook = lambda pod, problem: None
        self._binding: set[PodKey] = set()
        """Pods with a bind in flight (kept across rebuilds: those binds still finish)."""
        self._assumed_at: dict[PodKey, float] = {}
        """When each bind's assumption was made, for `expire_assumptions`."""
        self._picked_at: dict[PodKey, float] = {}
        """When each pick (a narrowed filter's assumption, see `pick`) was made."""
        self._reset()

    def _reset(self) -> None:
        self._feed = ChangeFeed(limit=self._feed_limit)
        self._state = ClusterState(feed=self._feed)
        self._ledger = Ledger(self._state)
        self._nodes: dict[NodeName, Node] = {}
        self._node_states: dict[str, NodeState] = {}
        self._problems: dict[NodeName, str] = {}
        self._pods: dict[PodKey, PodSpec] = {}
        self._observed: dict[PodKey, Observed] = {}
        self._invalid: dict[PodKey, str] = {}
        self._unheld: dict[PodKey, Assignment] = {}
        self._pending: dict[NodeName, dict[PodKey, list[PendingContainer]]] = {}
        self._members: dict[GangKey, set[PodKey]] = {}
        self._unreadable_nodes: set[NodeName] = set()
        self._unreadable_notes: dict[PodKey, str] = {}
        """Bound pods whose `vgpu.io/admitted` cannot be read (counted with their assignment)."""

    def subscribe(self, *, invalid: InvalidHook) -> None:
        """Be told when a watched pod cannot be read (the daemon's Events), outside the lock."""
        self._on_invalid = invalid

    # -- nodes ---------------------------------------------------------------------------------
    def apply_node(self, kind: str, obj: Obj) -> None:
        """Apply one node watch event (ADDED/MODIFIED upsert, DELETED forget)."""
        spec = node_spec(obj, self._names)
        name = spec.node.name
        with self._lock:
            if spec.unreadable and kind != "DELETED":
                self._unreadable_nodes.add(name)
            else:
                self._unreadable_nodes.discard(name)
            if kind == "DELETED":
                self._feed.mark(name)
                self._state.remove_node(name)
                self._nodes.pop(name, None)
                self._node_states.pop(name, None)
                self._problems.pop(name, None)
                return
            if self._problems.get(name) != (spec.problem or None):
                self._feed.mark(name)
            if spec.problem:
                self._problems[name] = spec.problem
            else:
                self._problems.pop(name, None)
            if self._nodes.get(name) == spec.node:
                return  # status heartbeats: nothing the scheduler counts changed
            self._nodes[name] = spec.node
            self._state.add_node(spec.node)
            self._node_states[name] = self._state.node(name)
            for assignment in list(self._unheld.values()):
                if assignment.node == name:
                    self._hold_observed(assignment)

    def node_state(self, name: str) -> NodeState | None:
        """The node's state, or None when the extender does not know it."""
        return self._node_states.get(name)

    # -- pods ----------------------------------------------------------------------------------
    def parse(self, obj: Obj) -> PodSpec:
        """Parse a pod with this cache's memory unit (raises `InvalidRequest`), once per version
        and once per content (`vgpu.extender.podmemo`). An object of the wrong shape is an
        `InvalidRequest` too, never another exception."""
        return self._parsed.parse(obj)

    def parse_fresh(self, obj: Obj) -> PodSpec:
        """Parse a pod as `parse` does but keep nothing: for request bodies, which must never
        stand for a version the watch will see (`vgpu.extender.resolve`)."""
        return self._parse(obj)

    def _parse(self, obj: Obj) -> PodSpec:
        try:
            return pod_spec(obj, memory_unit_mib=self._unit, names=self._names)
        except _MALFORMED as err:
            raise InvalidRequest(
                "Pod", f"malformed object ({type(err).__name__}: {err})", "send a v1.Pod"
            ) from None

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
            if spec is not None and self._unchanged(key, spec, obj):
                return
            if spec is None or spec.terminal:
                self._forget(key)
            else:
                self._invalid.pop(key, None)
                problem = self._upsert_or_drop(key, spec, obj)
            if problem:
                self._invalid[key] = problem
            self._changed.notify_all()
        if problem:
            self._on_invalid(obj, problem)

    def _unchanged(self, key: PodKey, spec: PodSpec, obj: Obj) -> bool:
        """Whether applying this version would change nothing: it parses as the pod's last one
        did (the very same parse), and a bound pod has the same annotations the cache reads and
        still holds what they gave it."""
        if self._pods.get(key) is not spec or key in self._invalid:
            return False
        if not spec.node:
            return True
        seen = self._observed.get(key)
        if seen is None or seen.spec is not spec or key in self._unheld:
            return False
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if not isinstance(annotations, dict) or notes_of(annotations) != seen.notes:
            return False
        held = self._ledger.holding(key)
        return held is not None and held.phase is Phase.BOUND and held.assignment == seen.assignment

    def _upsert_or_drop(self, key: PodKey, spec: PodSpec, obj: Obj) -> str | None:
        """Upsert a parsed pod; if its annotations cannot be read, forget it instead."""
        try:
            self._upsert(key, spec, obj)
        except _MALFORMED as err:
            self._forget(key)
            return f"metadata.annotations: unreadable ({type(err).__name__}: {err})"
        return None

    def remember(self, obj: Obj, spec: PodSpec) -> None:
        """Add a pod the API server has just returned (bind reads a pod the watch has not shown
        yet) before its watch event; never overrides the watch. Never fed from a request body."""
        with self._lock:
            if spec.request.key not in self._pods:
                self._upsert(spec.request.key, spec, obj)

    def _upsert(self, key: PodKey, spec: PodSpec, obj: Obj) -> None:
        old = self._pods.get(key)
        if (
            old is not None
            and old.gang is not None
            and (spec.gang is None or old.gang.key != spec.gang.key)
        ):
            self._leave(old.gang.key, key)
        self._pods[key] = spec
        if spec.gang is not None:
            self._members.setdefault(spec.gang.key, set()).add(key)
        if spec.node:
            self._observe_bound(key, spec, obj)
        else:
            self._observed.pop(key, None)

    def _observe_bound(self, key: PodKey, spec: PodSpec, obj: Obj) -> None:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        notes = notes_of(annotations)
        assignment = self._assignment_of(key, spec, annotations, notes)
        self._hold_observed(assignment)
        node_pending = self._pending.setdefault(NodeName(spec.node), {})
        self._feed.mark(spec.node)
        names = [c.name for c in assignment.containers]
        read = read_admitted(annotations.get(ADMITTED))
        if read.problem:
            self._unreadable_notes[key] = read.problem
        else:
            self._unreadable_notes.pop(key, None)
        admitted = read.among(names)
        waiting = spec.pending(assignment, admitted)
        if waiting:
            node_pending[key] = waiting
        else:
            node_pending.pop(key, None)
            if not node_pending:
                del self._pending[NodeName(spec.node)]
        if notes is None:
            self._observed.pop(key, None)
        else:
            self._observed[key] = Observed(spec, notes, assignment)

    def _assignment_of(
        self, key: PodKey, spec: PodSpec, annotations: Obj, notes: Notes | None
    ) -> Assignment:
        """The pod's signed assignment if it is this pod's, else its CPU and memory alone.
        Verified once per text (an HMAC and a JSON decoding): the node agent's admission
        changes the annotations, not the assignment."""
        seen = self._observed.get(key)
        if seen is not None and seen.spec is spec and notes and seen.notes[:2] == notes[:2]:
            return seen.assignment
        req = spec.request
        signed = verify(annotations, self._key)
        if (
            signed is not None
            and signed.node == spec.node
            and signed.pod == key
            and (not req.uid or signed.uid == req.uid)
        ):
            return signed
        return Assignment(key, NodeName(spec.node), req.cpu_milli, req.memory_mib, (), req.uid)

    def _hold_observed(self, assignment: Assignment) -> None:
        current = self._ledger.holding(assignment.pod)
        if current is not None and current.assignment == assignment:
            if current.phase is not Phase.BOUND:
                self._ledger.confirm(assignment)
            return
        if current is not None:
            self._ledger.release(assignment.pod)
        problem = self._state.can_charge(assignment)
        if problem is not None:
            self._unheld[assignment.pod] = assignment
            log.warning("cannot count bound pod %s yet: %s", assignment.pod, problem)
            return
        self._unheld.pop(assignment.pod, None)
        self._ledger.confirm(assignment)

    def _forget(self, key: PodKey) -> None:
        """Drop everything kept about the pod. Its holding is released here, so its pick and
        assumption timers go too (left to the sweep, they piled up wherever none ran)."""
        spec = self._pods.pop(key, None)
        self._observed.pop(key, None)
        self._picked_at.pop(key, None)
        self._assumed_at.pop(key, None)
        self._invalid.pop(key, None)
        self._unheld.pop(key, None)
        self._unreadable_notes.pop(key, None)
        held = self._ledger.release(key)
        node = spec.node if spec is not None and spec.node else (held.node if held else "")
        if node and NodeName(node) in self._pending:
            self._feed.mark(node)
            self._pending[NodeName(node)].pop(key, None)
            if not self._pending[NodeName(node)]:
                del self._pending[NodeName(node)]
        gang = spec.gang.key if spec is not None and spec.gang is not None else None
        if gang is not None:
            self._leave(gang, key)
        if spec is not None:
            self._gangs.member_gone(key, gang)

    def _leave(self, gang: GangKey, key: PodKey) -> None:
        """The pod is no longer a member; a gang without members is forgotten, so the index
        holds the gangs with pods, not every gang name ever seen (issue 25, finding 8)."""
        members = self._members.get(gang)
        if members is not None:
            members.discard(key)
            if not members:
                del self._members[gang]

    # -- rebuild -------------------------------------------------------------------------------
    def replace_all(self, nodes: Iterable[Obj], pods: Iterable[Obj]) -> None:
        """Rebuild everything from a fresh listing (start-up, new leadership term): gangs and
        assumptions are forgotten (their holdings are gone; `restore_gangs` reserves again the
        places of gangs with bound members); binds in flight still finish."""
        with self._lock:
            self._reset()
            self._gangs.reset()
            self._assumed_at.clear()
            self._picked_at.clear()
            for node in nodes:
                self._apply_one(self.apply_node, node)
            for pod in pods:
                self._apply_one(self.apply_pod, pod)

    def unreadable(self) -> dict[str, int]:
        """Objects the cache holds that carry a value it cannot read, by kind: nodes (an
        unreadable inventory or allocatable) and pods (unreadable, or with an unreadable
        `vgpu.io/admitted`), for the `vgpu_extender_unreadable_objects` metric."""
        with self._lock:
            pods = len(self._invalid) + len(self._unreadable_notes.keys() - self._invalid.keys())
            return {"node": len(self._unreadable_nodes), "pod": pods}

    def restore_gangs(
        self, scheduler: Scheduler, size_of: Callable[[GangKey], int | None]
    ) -> list[GangKey]:
        """Reserve again the places of gangs with bound members (after `replace_all` or the
        first sync): see `GangCoordinator.restore`."""
        with self._lock:
            return self._gangs.restore(scheduler, size_of)

    def _apply_one(self, apply: Callable[[str, Obj], None], obj: Obj) -> None:
        """One object of a rebuild: one that cannot be applied is skipped and logged (as the
        watch skips its event), never the end of the rebuild (issue 25, finding 1)."""
        try:
            apply("ADDED", obj)
        except Exception:  # a bug, not the listing: the other objects still count
            log.exception("rebuilding the cache: an object could not be applied; skipped")
