"""The label and annotation keys that put a pod into a gang, shared by every reader.

The extender (which plans gangs) and the report (which shows them) must agree on these keys; one
drifted once (`vgpu.io/gang-size`), so they live here only, with the one reading of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.decode import MAX_NAME_CHARS, MAX_SMALL_CHARS, guard
from vgpu.core.errors import InvalidRequest

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""scheduler-plugins: the minimum is the PodGroup object's `spec.minMember`."""
LEGACY_GROUP_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LEGACY_GROUP_OLD = "pod-group.scheduling.sigs.k8s.io"
"""The older bare form of the lightweight label."""
LEGACY_GROUP_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"
KUEUE_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
"""Kueue's plain-pod groups: a label naming the group, an annotation with its total count."""
GANG_NAME = "vgpu.io/gang-name"
GANG_SIZE = "vgpu.io/gang-size"


@dataclass(frozen=True, slots=True)
class GangRef:
    """The gang a pod names, before its minimum is judged: each reader applies its own rule
    (the extender refuses a bad size, the report shows it as unknown)."""

    name: str
    size: str | None
    """The minimum as written on the pod; None with `from_pod_group` (read the PodGroup)."""
    field: str
    """Where the minimum is written, for messages ("" for a PodGroup)."""
    from_pod_group: bool


def gang_ref(metadata: Mapping[str, Any]) -> GangRef | None:
    """Which gang, if any, a pod's metadata puts it in (first convention that names one).
    Raises `InvalidRequest` naming the field for a value no API server writes (not a string,
    too long), and nothing else (`vgpu.api.decode`)."""
    with guard("metadata", _unreadable):
        labels = _strings(metadata.get("labels"), "metadata.labels")
        annotations = _strings(metadata.get("annotations"), "metadata.annotations")
        if name := labels.get(POD_GROUP_LABEL):
            return GangRef(_name(name, f"metadata.labels[{POD_GROUP_LABEL}]"), None, "", True)
        if name := labels.get(LEGACY_GROUP_NAME) or labels.get(LEGACY_GROUP_OLD):
            size = labels.get(LEGACY_GROUP_MIN)
            field = f"metadata.labels[{LEGACY_GROUP_MIN}]"
            return GangRef(_name(name, "metadata.labels"), _size(size, field), field, False)
        if name := labels.get(KUEUE_GROUP_NAME):
            size = annotations.get(KUEUE_GROUP_COUNT)
            field = f"metadata.annotations[{KUEUE_GROUP_COUNT}]"
            name = _name(name, f"metadata.labels[{KUEUE_GROUP_NAME}]")
            return GangRef(name, _size(size, field), field, False)
        if name := annotations.get(GANG_NAME):
            size = annotations.get(GANG_SIZE)
            field = f"metadata.annotations[{GANG_SIZE}]"
            name = _name(name, f"metadata.annotations[{GANG_NAME}]")
            return GangRef(name, _size(size, field), field, False)
    return None


_FIX = "write the gang's name and size as short strings"


def _unreadable(message: str) -> InvalidRequest:
    field, _, problem = message.partition(": ")
    return InvalidRequest(field, problem, _FIX)


def _strings(value: object, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequest(field, f"{type(value).__name__} is not an object", _FIX)
    return value


def _name(value: object, field: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS:
        what = f"a {type(value).__name__}" if not isinstance(value, str) else "too long"
        raise InvalidRequest(field, f"{what}, not a gang name of <= {MAX_NAME_CHARS}", _FIX)
    return value


def _size(value: object, field: str) -> str | None:
    """The size as written, bounded: each reader judges it (None: not written)."""
    if value is None:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise InvalidRequest(field, f"a {type(value).__name__}, not a gang size", _FIX)
    text = value if isinstance(value, str) else repr(value)
    if len(text) > MAX_SMALL_CHARS:
        raise InvalidRequest(field, f"{len(text)} characters, not a gang size", _FIX)
    return text
