"""Reading a pod the way the kubelet will treat its vGPU asks: one reader for extender and agent.

* `cores_limit`: the pod's `vgpu.io/cores-limit` annotation (an elastic upper bound on cores,
  in percent of SMs), part of every container's grant and so of the hand-off rule.
* `namespace_of`, `is_terminal`, `is_deleting`: the facts every reader needs, read one way. A
  pod's namespace defaults to "default" (as the API server fills it in); a pod is terminal when
  its phase is Succeeded or Failed (its containers hold nothing any more); a pod being deleted
  (`deletionTimestamp`) still runs until its phase says otherwise, so it is a separate fact:
  the node agent admits nothing for it, the extender keeps charging it until it is gone.
* `kubelet_containers`: the containers that ask vGPU devices, in the order the kubelet's device
  manager allocates them (init containers, then app containers, each in spec order) and with
  their role: a regular init container, a restartable ("sidecar") init container
  (`restartPolicy: Always`), or an app container. The role decides device reuse
  (`vgpu.core.kubelet_reuse`).

Pure: dict in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.core.kubelet_reuse import Role

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
"""Pod phases after which no container runs again (the kubelet releases its devices)."""

CORES_LIMIT = "vgpu.io/cores-limit"
"""Pod annotation: elastic upper bound on cores (percent of SMs) for modes that support it."""


def namespace_of(meta: Mapping[str, Any]) -> str:
    """The pod's namespace ("default" when the object names none)."""
    return str(meta.get("namespace") or "default")


def is_terminal(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's phase is Succeeded or Failed."""
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in TERMINAL_PHASES


def is_deleting(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is being deleted (it may still run during its grace period)."""
    meta = pod.get("metadata")
    return isinstance(meta, Mapping) and bool(meta.get("deletionTimestamp"))


def cores_limit(annotations: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """The pod's elastic cores limit: (value, None), (None, None) if unset, or (None, problem)."""
    raw = annotations.get(CORES_LIMIT)
    if raw is None or not str(raw).strip():
        return None, None
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 3) or not 1 <= int(text) <= 100:
        return None, f"{CORES_LIMIT}={raw!r}: expected a whole percentage 1..100"
    return int(text), None


@dataclass(frozen=True, slots=True)
class KubeletContainer:
    """A container as the device manager meets it: name, role and raw resources."""

    name: str
    role: Role
    resources: Mapping[str, Any]


def role_of(raw: Mapping[str, Any], init: bool) -> Role:
    """A container's role for device reuse (pkg/api/v1/pod IsRestartableInitContainer)."""
    if not init:
        return Role.APP
    return Role.SIDECAR if raw.get("restartPolicy") == "Always" else Role.INIT


def kubelet_containers(pod: Mapping[str, Any]) -> list[KubeletContainer]:
    """Every container in the device manager's allocation order, with its role."""
    spec = pod.get("spec") or {}
    out = []
    for section, init in (("initContainers", True), ("containers", False)):
        for raw in spec.get(section) or ():
            out.append(
                KubeletContainer(
                    str(raw.get("name") or ""), role_of(raw, init), raw.get("resources") or {}
                )
            )
    return out
