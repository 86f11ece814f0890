"""The watch intake: node and pod watch events applied to the extender's state, and rebuilds.

One of the cache's roles (`vgpu.extender.cache.cluster` is the facade callers use): each event takes
the state's lock (`vgpu.extender.cache.parts`). A pod's content never makes an event raise: a pod
that cannot be read holds nothing, is kept in the pod book's `invalid` and reported to the
cache's `invalid` hook outside the lock; a version that changes nothing the cache reads (the
pod's status...) changes nothing. A rebuild (`replace_all`) replaces the state from a fresh
listing, skipping (and logging) any object that cannot be applied, as the watch would.

A pod bind read from the API server before the watch showed it is added (`remember`) unless the
watch has shown it already, or has shown it deleted: the UIDs of the last `GONE_KEPT` pods the
watch deleted are kept, so a deletion that arrives between that read and the bind's claim does
not leave a copy of a gone pod in the book until the next rebuild (a UID is never reused).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable

from vgpu.api.nodefit import node_facts
from vgpu.api.nodespec import node_spec
from vgpu.api.podspec import PodSpec, key_of
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import PodKey
from vgpu.extender.cache.parts import CacheParts, Obj
from vgpu.extender.gangs.coordinator import GangCoordinator
from vgpu.extender.pods.parser import MALFORMED

log = logging.getLogger(__name__)
GONE_KEPT = 4096
"""UIDs of deleted pods kept, so that `remember` never adds one back (module doc)."""


class WatchIntake:
    """Applies watch events and listings to the state (module doc)."""

    def __init__(self, parts: CacheParts, gangs: GangCoordinator) -> None:
        self._parts = parts
        self._gangs = gangs
        self._gone: OrderedDict[str, None] = OrderedDict()

    def apply_node(self, kind: str, obj: Obj) -> None:
        """One node watch event (ADDED/MODIFIED upsert, DELETED forget)."""
        parts = self._parts
        spec = node_spec(obj, parts.names)
        facts = node_facts(obj)
        with parts.lock:
            if kind == "DELETED":
                parts.node_facts.pop(str(spec.node.name), None)
            else:
                parts.node_facts[str(spec.node.name)] = facts
            if parts.table.apply(kind, spec):
                parts.book.hold_unheld_on(spec.node.name)

    def apply_pod(self, kind: str, obj: Obj) -> None:
        """One pod watch event (module doc)."""
        parts = self._parts
        key = key_of(obj)
        if kind == "DELETED":  # its key is all that is needed
            with parts.lock:
                self._went(obj)
                self._forget(key)
                parts.changed.notify_all()
            return
        try:
            spec: PodSpec | None = parts.parser.parse(obj)
            problem = None
        except InvalidRequest as err:
            spec, problem = None, str(err)
        with parts.lock:
            if spec is not None and parts.book.unchanged(key, spec, obj):
                return
            if spec is None or spec.terminal:
                self._forget(key)
            else:
                parts.book.mark_invalid(key, None)
                problem = self._upsert_or_drop(key, spec, obj)
            if problem:
                parts.book.mark_invalid(key, problem)
            parts.changed.notify_all()
        if problem:
            parts.on_invalid(obj, problem)

    def _upsert_or_drop(self, key: PodKey, spec: PodSpec, obj: Obj) -> str | None:
        """Upsert a parsed pod; if its annotations cannot be read, forget it instead."""
        try:
            self._parts.book.upsert(key, spec, obj)
        except MALFORMED as err:
            self._forget(key)
            return f"metadata.annotations: unreadable ({type(err).__name__}: {err})"
        return None

    def remember(self, obj: Obj, spec: PodSpec) -> None:
        """Add a pod the API server has just returned, unless the watch shows it already."""
        with self._parts.lock:
            if spec.request.key not in self._parts.book.pods and _uid(obj) not in self._gone:
                self._parts.book.upsert(spec.request.key, spec, obj)

    def _went(self, obj: Obj) -> None:
        """Note a deleted pod's UID (the last `GONE_KEPT`)."""
        uid = _uid(obj)
        if uid:
            self._gone[uid] = None
            if len(self._gone) > GONE_KEPT:
                self._gone.popitem(last=False)

    def _forget(self, key: PodKey) -> None:
        spec = self._parts.book.forget(key)
        self._parts.binds.forget_pod(key)
        if spec is not None:
            self._gangs.member_gone(key, spec.gang.key if spec.gang is not None else None)

    def replace_all(self, nodes: Iterable[Obj], pods: Iterable[Obj]) -> None:
        """Rebuild everything from a fresh listing: gangs and assumptions are forgotten (their
        holdings are gone); binds in flight still finish."""
        with self._parts.lock:
            self._parts.reset()
            self._gangs.reset()
            self._parts.binds.forget_times()
            for node in nodes:
                self._apply_one(self.apply_node, node)
            for pod in pods:
                self._apply_one(self.apply_pod, pod)

    def _apply_one(self, apply: Callable[[str, Obj], None], obj: Obj) -> None:
        """One object of a rebuild: one that cannot be applied is skipped and logged (as the
        watch skips its event), never the end of the rebuild: one unreadable object must not stop
        every bind."""
        try:
            apply("ADDED", obj)
        except Exception:  # a bug, not the listing: the other objects still count
            log.exception("rebuilding the cache: an object could not be applied; skipped")

    def unreadable(self) -> dict[str, int]:
        """Objects held with a value the cache cannot read, by kind (see the cache's)."""
        with self._parts.lock:
            return {
                "node": self._parts.table.unreadable_count(),
                "pod": self._parts.book.unreadable_count(),
            }


def _uid(obj: Obj) -> str:
    meta = obj.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""
