"""What one Pod object says about vgpu: its asks, its assignment and which containers are admitted.

Pure functions over the pod dict as the API server returns it. The asks are what the kubelet
will hold for the pod (`vgpu.api.podasks`, the extender's and the agent's reader); an ask that
cannot be read counts as none here (the extender refuses the pod and says why). The
`vgpu.io/admitted` annotation, written by the node agent after Allocate, is read by
`vgpu.api.admitted` as the extender reads it. A container the kubelet has started (its status is running or terminated) was admitted too,
whatever the annotation says yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.admitted import ADMITTED, Admitted, read_admitted
from vgpu.api.assignment import ASSIGNMENT, decode
from vgpu.api.podasks import pod_asks
from vgpu.api.podread import TERMINAL_PHASES, namespace_of
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.errors import InvalidRequest
from vgpu.core.model import Assignment

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
    """What the kubelet holds once it reuses init containers' devices (`PodAsks.held`)."""
    assignment: Assignment | None
    assignment_error: str
    admitted: Admitted
    """The annotation, plus the containers the kubelet has started (they were admitted too)."""

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
        return self.admitted.includes(container)


def pod_facts(pod: Obj, names: ResourceNames = DEFAULT_NAMES) -> PodFacts:
    """Extract `PodFacts`; a malformed assignment is kept as `assignment_error`, never raised."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    assignment, error = _assignment(annotations.get(ASSIGNMENT))
    admitted = read_admitted(annotations.get(ADMITTED))
    held = pod_asks(pod, names).held
    return PodFacts(
        namespace=namespace_of(meta),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        node=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        asks_cores=held.cores,
        asks_memory_blocks=held.memory_blocks,
        assignment=assignment,
        assignment_error=error,
        admitted=Admitted(admitted.names | _started(status), admitted.everyone, admitted.problem),
    )


def _assignment(text: object) -> tuple[Assignment | None, str]:
    if not isinstance(text, str) or not text:
        return None, ""
    try:
        return decode(text), ""
    except InvalidRequest as e:
        return None, str(e)


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
