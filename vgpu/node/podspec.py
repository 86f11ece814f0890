"""What the hand-off needs to know about a pod, read from the pod object (a plain dict).

The node agent watches the pods bound to its node. For each it needs the key, UID, node, the
vGPU asks of every container as the kubelet admits them (read by `vgpu.api.podasks`, as the
extender reads them), its annotations and whether it is finished. A malformed ask is reported
in `problems`, so the pod is refused at Allocate with a message instead of crashing the agent.

Pure: dict in, frozen value out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu.api.podasks import ContainerAsk, pod_asks
from vgpu.api.podread import CoresLimit, is_deleting, is_terminal, namespace_of
from vgpu.api.podread import cores_limit as read_cores_limit
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.ids import PodKey, pod_key

__all__ = ["ContainerAsk", "PodInfo", "cores_limit", "pod_info"]


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A pod as the hand-off sees it. `containers` holds only containers that ask vGPU devices."""

    key: PodKey
    uid: str
    node: str
    containers: tuple[ContainerAsk, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    terminal: bool = False
    phase: str = ""
    problems: tuple[str, ...] = ()
    started: bool = False
    """Some container of the pod has run (its status says running or terminated): the kubelet
    admitted the pod, so it allocated every container's devices (`vgpu.node.handoff.reconcile`)."""
    deleting: bool = False
    """The pod is being deleted (`terminal` too): one that has not started may still be admitted
    (`Handoff.observe`)."""

    @property
    def may_be_admitted(self) -> bool:
        """Whether the kubelet may still allocate this pod's devices. A pod being deleted that
        has not started may be: the kubelet admits a pod it first sees already deleting, device
        allocation included (`HandlePodAdditions` in pkg/kubelet/kubelet.go skips admission only
        once its pod worker was asked to terminate the pod, which a pod it has not seen was not)."""
        if not self.terminal:
            return True
        return self.deleting and not self.started and self.phase in ("", "Pending")

    def container(self, name: str) -> ContainerAsk | None:
        return next((c for c in self.containers if c.name == name), None)

    @property
    def asks(self) -> bool:
        return bool(self.containers)


def pod_info(pod: Mapping[str, Any], names: ResourceNames | None = None) -> PodInfo:
    """Read a pod object (wire form, as from the API server) into a `PodInfo`."""
    names = names or DEFAULT_NAMES
    meta, spec, status = (_object(pod.get(part)) for part in ("metadata", "spec", "status"))
    asks = pod_asks(pod, names)
    raw = _object(meta.get("annotations"))
    annotations = {str(k): v for k, v in raw.items() if isinstance(v, str)}
    return PodInfo(
        key=pod_key(namespace_of(meta), _text(meta.get("name"))),
        uid=_text(meta.get("uid")),
        node=_text(spec.get("nodeName")),
        containers=asks.containers,
        annotations=annotations,
        terminal=is_terminal(pod) or is_deleting(pod),  # finished, or on its way out
        phase=_text(status.get("phase")),
        problems=tuple(str(p) for p in asks.problems),
        started=_started(status),
        deleting=is_deleting(pod),
    )


def _started(status: Mapping[str, Any]) -> bool:
    """Whether a container status of the pod says it is running or has terminated."""
    for part in ("initContainerStatuses", "containerStatuses"):
        listed = status.get(part)
        for entry in listed if isinstance(listed, list) else ():
            state = _object(_object(entry).get("state"))
            if "running" in state or "terminated" in state:
                return True
    return False


def _object(value: object) -> Mapping[str, Any]:
    """A part of the pod, or nothing when it is not an object (its problem is `pod_asks`')."""
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str:
    """A name the API server writes as a string; anything else is no name."""
    return value if isinstance(value, str) else ""


def cores_limit(info: PodInfo) -> CoresLimit:
    """The pod's elastic cores limit: a value, neither (unset) or a problem."""
    return read_cores_limit(info.annotations)
