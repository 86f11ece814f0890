"""The label and annotation keys that put a pod into a gang, shared by every reader.

The extender (which plans gangs) and the report (which shows them) must agree on these keys; one
drifted once (`vgpu.io/gang-size`), so they live here only, with the one reading of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""scheduler-plugins: the minimum is the PodGroup object's `spec.minMember`."""
LEGACY_GROUP_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LEGACY_GROUP_OLD = "pod-group.scheduling.sigs.k8s.io"
"""The older bare form of the lightweight label."""
LEGACY_GROUP_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"
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
    """Which gang, if any, a pod's metadata puts it in (first convention that names one)."""
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    if name := labels.get(POD_GROUP_LABEL):
        return GangRef(str(name), None, "", True)
    if name := labels.get(LEGACY_GROUP_NAME) or labels.get(LEGACY_GROUP_OLD):
        size = labels.get(LEGACY_GROUP_MIN)
        return GangRef(str(name), size, f"metadata.labels[{LEGACY_GROUP_MIN}]", False)
    if name := annotations.get(GANG_NAME):
        size = annotations.get(GANG_SIZE)
        return GangRef(str(name), size, f"metadata.annotations[{GANG_SIZE}]", False)
    return None
