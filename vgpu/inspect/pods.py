"""What one Pod object says about vgpu: its asks, its assignment and which containers are admitted.

Pure functions over the pod dict as the API server returns it. The `vgpu.io/admitted` annotation
is written by the node agent after Allocate; it may name the admitted containers (a JSON list or
a comma-separated list) or say `true`/`*` for all of them. A container the kubelet has started
(its status is running or terminated) was admitted too, whatever the annotation says yet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.assignment import ADMITTED, ASSIGNMENT, decode
from vgpu.api.quantity import whole_count
from vgpu.core.errors import InvalidRequest
from vgpu.core.model import Assignment

CORES = "vgpu.io/cores"
MEMORY = "vgpu.io/memory"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PodFacts:
    """The vgpu-relevant facts of one pod."""

    namespace: str
    name: str
    uid: str
    node: str
    phase: str
    asks_cores: int
    asks_memory_blocks: int
    assignment: Assignment | None
    assignment_error: str
    admitted: frozenset[str]
    all_admitted: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def asks_vgpu(self) -> bool:
        return self.asks_cores > 0 or self.asks_memory_blocks > 0

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def is_admitted(self, container: str) -> bool:
        return self.all_admitted or container in self.admitted


def pod_facts(pod: Obj) -> PodFacts:
    """Extract `PodFacts`; a malformed assignment is kept as `assignment_error`, never raised."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    assignment, error = _assignment(annotations.get(ASSIGNMENT))
    named, everything = _admitted_annotation(annotations.get(ADMITTED))
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    return PodFacts(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        node=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        asks_cores=sum(_quantity(c, CORES) for c in containers),
        asks_memory_blocks=sum(_quantity(c, MEMORY) for c in containers),
        assignment=assignment,
        assignment_error=error,
        admitted=named | _started(status),
        all_admitted=everything,
    )


def _assignment(text: object) -> tuple[Assignment | None, str]:
    if not isinstance(text, str) or not text:
        return None, ""
    try:
        return decode(text), ""
    except InvalidRequest as e:
        return None, str(e)


def _admitted_annotation(value: object) -> tuple[frozenset[str], bool]:
    if not isinstance(value, str) or not value.strip():
        return frozenset(), False
    text = value.strip()
    if text.lower() in {"true", "*", "all"}:
        return frozenset(), True
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, list):
        return frozenset(str(x) for x in doc), False
    if isinstance(doc, dict):
        return frozenset(str(k) for k in doc), False
    return frozenset(p.strip() for p in text.split(",") if p.strip()), False


def _started(status: Obj) -> frozenset[str]:
    statuses = list(status.get("initContainerStatuses") or []) + list(
        status.get("containerStatuses") or []
    )
    started = set()
    for s in statuses:
        state = s.get("state") or {}
        if "running" in state or "terminated" in state or s.get("lastState", {}).get("terminated"):
            started.add(str(s.get("name")))
    return frozenset(started)


def _quantity(container: Obj, resource: str) -> int:
    """A whole-number extended-resource ask (limits win; extended resources need limits)."""
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(resource)
        if value is not None:
            try:
                return whole_count(value, resource)
            except InvalidRequest:
                return 0
    return 0
