"""The cache's pod book: every watched pod, what it holds in the ledger, and the indexes the
verbs need (pending containers per node, gang members, pods that cannot be read or counted).
A gang's members are its pods of the schedulers the extender serves: kube-scheduler never sends
another scheduler's pod to the extender, so such a pod, naming the gang, would have its place
planned and held beside the members' (outside its queue, which does not count it) and, once
bound, would mark the gang started.

A part of `ClusterCache` (`vgpu.extender.cache.cluster`), which makes a new one on every rebuild and
calls it under its lock. Bound pods are *confirmed* in the ledger with their signed assignment
(`vgpu.io/assignment`), or with their CPU and memory alone when they have none (a pod without a
valid assignment gets no GPU from the node agent, so it holds none); a bound pod whose node is
unknown or too small waits in `unheld` until its node can count it. A forgotten pod releases its
holding at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from vgpu.api.admitted import ADMITTED, read_admitted
from vgpu.api.assignment import verify
from vgpu.api.podspec import VGPU_SCHEDULER, PodSpec
from vgpu.core.changes import ChangeFeed
from vgpu.core.handoff_rule import PendingContainer, pending_of
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import Assignment, Phase
from vgpu.core.state import ClusterState
from vgpu.extender.pods.memo import Notes, Observed, notes_of

log = logging.getLogger(__name__)
Obj = dict[str, Any]


class PodBook:
    """Watched pods and their holdings, kept in step with the ledger (module doc)."""

    def __init__(
        self,
        state: ClusterState,
        ledger: Ledger,
        feed: ChangeFeed,
        key: bytes,
        *,
        schedulers: AbstractSet[str] = frozenset({VGPU_SCHEDULER}),
    ) -> None:
        self._state = state
        self._schedulers = schedulers
        """Only a pod of these schedulers is a gang member (`upsert`)."""
        self._ledger = ledger
        self._feed = feed
        self._key = key
        self._pods: dict[PodKey, PodSpec] = {}
        self._observed: dict[PodKey, Observed] = {}
        self._invalid: dict[PodKey, str] = {}
        self._unheld: dict[PodKey, Assignment] = {}
        self._pending: dict[NodeName, dict[PodKey, list[PendingContainer]]] = {}
        self._members: dict[GangKey, set[PodKey]] = {}
        self._unreadable_notes: dict[PodKey, str] = {}
        """Bound pods whose `vgpu.io/admitted` cannot be read (counted with their assignment)."""

    def unchanged(self, key: PodKey, spec: PodSpec, obj: Obj) -> bool:
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

    def mark_invalid(self, key: PodKey, problem: str | None) -> None:
        """Record why a pod cannot be read (None: it can)."""
        if problem is None:
            self._invalid.pop(key, None)
        else:
            self._invalid[key] = problem

    def upsert(self, key: PodKey, spec: PodSpec, obj: Obj) -> None:
        """Add or update a readable pod (raises on unreadable annotations: the caller forgets
        the pod then)."""
        old = self._pods.get(key)
        if (
            old is not None
            and old.gang is not None
            and (spec.gang is None or old.gang.key != spec.gang.key)
        ):
            self._leave(old.gang.key, key)
        self._pods[key] = spec
        if spec.gang is not None and spec.scheduler in self._schedulers:
            self._members.setdefault(spec.gang.key, set()).add(key)
        if spec.node:
            self._observe_bound(key, spec, obj)
        else:
            self._observed.pop(key, None)

    def _observe_bound(self, key: PodKey, spec: PodSpec, obj: Obj) -> None:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        notes = notes_of(annotations)
        assignment = self._assignment_of(key, spec, annotations, notes)
        self.hold_observed(assignment)
        node_pending = self._pending.setdefault(NodeName(spec.node), {})
        self._feed.mark(spec.node)
        names = [c.name for c in assignment.containers]
        read = read_admitted(annotations.get(ADMITTED))
        if read.problem:
            self._unreadable_notes[key] = read.problem
        else:
            self._unreadable_notes.pop(key, None)
        waiting = spec.pending(assignment, read.among(names))
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

    def hold_observed(self, assignment: Assignment) -> None:
        """Confirm a bound pod's assignment in the ledger, or keep it unheld while its node
        cannot count it."""
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

    def hold_unheld_on(self, node: NodeName) -> None:
        """The node was (re)counted: try again the bound pods it could not count."""
        for assignment in list(self._unheld.values()):
            if assignment.node == node:
                self.hold_observed(assignment)

    def forget(self, key: PodKey) -> PodSpec | None:
        """Drop a pod and release its holding; returns the pod as it was known, if it was."""
        spec = self._pods.pop(key, None)
        self._observed.pop(key, None)
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
        if spec is not None and spec.gang is not None:
            self._leave(spec.gang.key, key)
        return spec

    def _leave(self, gang: GangKey, key: PodKey) -> None:
        """The pod is no longer a member; a gang without members is forgotten, so the index
        holds the gangs with pods, not every gang name ever seen (the extender's memory must not
        grow with the pods it has scheduled)."""
        members = self._members.get(gang)
        if members is not None:
            members.discard(key)
            if not members:
                del self._members[gang]

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

    def unreadable_count(self) -> int:
        """Pods that cannot be read, or whose `vgpu.io/admitted` cannot be."""
        return len(self._invalid) + len(self._unreadable_notes.keys() - self._invalid.keys())

    @property
    def pods(self) -> Mapping[PodKey, PodSpec]:
        """Watched pods by key, parsed."""
        return self._pods

    @property
    def invalid(self) -> Mapping[PodKey, str]:
        """Watched pods that cannot be read, and why (they hold nothing)."""
        return self._invalid

    @property
    def unheld(self) -> Mapping[PodKey, Assignment]:
        """Bound pods that cannot be counted yet (their node is unknown or too small)."""
        return self._unheld

    @property
    def pending(self) -> Mapping[NodeName, Mapping[PodKey, Sequence[PendingContainer]]]:
        """Containers bound and not admitted, by node and pod (invariant I)."""
        return self._pending

    @property
    def members(self) -> Mapping[GangKey, AbstractSet[PodKey]]:
        """Watched gang members by gang (pods of the schedulers served: module doc)."""
        return self._members
