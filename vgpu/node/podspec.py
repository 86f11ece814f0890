"""What the hand-off needs to know about a pod, read from the pod object (a plain dict).

The node agent watches the pods bound to its node. For each it needs the key, UID, node, the
vGPU asks of every container in the order the kubelet admits them (init containers first, then
app containers, each in spec order), its annotations and whether it is finished. Extended
resources are integers and live in `limits` (a request, if given, must equal the limit); a
malformed quantity makes the container ask nothing here and is reported in `problems`, so the
pod is refused at Allocate with a message instead of crashing the agent.

Pure: dict in, frozen value out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu.api.podread import (
    KubeletContainer,
    is_deleting,
    is_terminal,
    kubelet_containers,
    namespace_of,
)
from vgpu.api.podread import cores_limit as read_cores_limit
from vgpu.api.quantity import whole_count
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import PodKey, pod_key
from vgpu.core.kubelet_reuse import Role
from vgpu.node.devices import ResourceNames


@dataclass(frozen=True, slots=True)
class ContainerAsk:
    """The vGPU devices one container asks of the kubelet: cores and memory blocks."""

    name: str
    cores: int = 0
    memory_blocks: int = 0
    init: bool = False

    @property
    def asks(self) -> bool:
        return bool(self.cores or self.memory_blocks)


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

    def container(self, name: str) -> ContainerAsk | None:
        return next((c for c in self.containers if c.name == name), None)

    @property
    def asks(self) -> bool:
        return bool(self.containers)


def _quantity(value: Any, where: str, problems: list[str]) -> int:
    try:
        return whole_count(value, where)
    except InvalidRequest as err:
        problems.append(str(err))
        return 0


def _ask(kc: KubeletContainer, names: ResourceNames, problems: list[str]) -> ContainerAsk:
    name, resources, init = kc.name, kc.resources, kc.role is not Role.APP
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    counts = []
    for resource in (names.cores, names.memory):
        where = f"container {name!r} {resource}"
        value = limits.get(resource, requests.get(resource))
        count = 0 if value is None else _quantity(value, where, problems)
        if (
            resource in requests
            and resource in limits
            and str(requests[resource]) != str(limits[resource])
        ):
            problems.append(f"{where}: request {requests[resource]} differs from limit")
        counts.append(count)
    return ContainerAsk(name, counts[0], counts[1], init)


def pod_info(pod: Mapping[str, Any], names: ResourceNames | None = None) -> PodInfo:
    """Read a pod object (wire form, as from the API server) into a `PodInfo`."""
    names = names or ResourceNames()
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    problems: list[str] = []
    asks = [_ask(c, names, problems) for c in kubelet_containers(pod)]
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    return PodInfo(
        key=pod_key(namespace_of(meta), str(meta.get("name", ""))),
        uid=str(meta.get("uid", "")),
        node=str(spec.get("nodeName") or ""),
        containers=tuple(a for a in asks if a.asks),
        annotations=annotations,
        terminal=is_terminal(pod) or is_deleting(pod),  # nothing is admitted for either
        phase=str(status.get("phase") or ""),
        problems=tuple(problems),
    )


def cores_limit(info: PodInfo) -> tuple[int | None, str | None]:
    """The pod's elastic cores limit: (value, None), (None, None) if unset, or (None, problem)."""
    return read_cores_limit(info.annotations)
