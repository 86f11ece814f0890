"""Whether the kubelet lists a pod's vGPU device IDs in its status (and so rewrites it).

With the ResourceHealthStatus feature gate (on by default since Kubernetes 1.36) the kubelet
builds `status.containerStatuses[].allocatedResourcesStatus` afresh at every pod sync: one
entry per device-plugin resource, one ID per device, both in Go map order
(`UpdateAllocatedResourcesStatus` in pkg/kubelet/cm/devicemanager/manager.go). A container
holding two or more vGPU unit IDs therefore gets a new order, and a status write, at nearly
every sync; the agent cannot change that, but it can tell the operator which setting stops it
(docs/operations.md, "Status writes and retries"). Pure: reads a pod object, never raises.
"""

from __future__ import annotations

from typing import Any

from vgpu.api.resources import ResourceNames

STATUS_KEYS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")


def _items(value: Any) -> list[dict[str, Any]]:
    """The dicts of a list field; anything malformed reads as empty."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _unit_ids(container: dict[str, Any], ours: frozenset[str]) -> int:
    entries = _items(container.get("allocatedResourcesStatus"))
    return sum(len(_items(e.get("resources"))) for e in entries if e.get("name") in ours)


def lists_unit_ids(pod: dict[str, Any], names: ResourceNames) -> bool:
    """True when some container's status lists two or more of our device IDs: enough for the
    kubelet's map order to change between syncs."""
    status = pod.get("status")
    if not isinstance(status, dict):
        return False
    ours = frozenset((names.cores, names.memory))
    return any(
        _unit_ids(container, ours) >= 2
        for key in STATUS_KEYS
        for container in _items(status.get(key))
    )
