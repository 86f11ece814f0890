"""A pod's vGPU asks as the kubelet's device manager will meet them: the one reader of the
extender (`vgpu.api.podspec`), the node agent (`vgpu.node.podspec`) and the report
(`vgpu.inspect.pods`).

* Order and roles: init containers, then app containers, each in spec order (the device
  manager's allocation order), each a regular init container, a restartable ("sidecar") init
  container (`restartPolicy: Always`) or an app container. The role decides device reuse
  (`vgpu.core.kubelet_reuse`), and so what the pod holds on its node (`PodAsks.held`).
* Limits and requests: an extended resource is never overcommitted, so the API server wants a
  limit and a request, if given, equal to it (pkg/apis/core/validation/validation.go,
  `ValidateResourceRequirements`: "must be equal to ... limit"). The ask is the limit, or the
  request of a hand-made object without one; a request of another value is a problem.
* A cap: at most `MAX_VGPU_CONTAINERS` containers of a pod ask vGPU devices. The extender's
  work for a pod grows with them (its invariant-I check is near-linear, its placement is not
  free), and a filter runs on the loop every other pod waits on (a pod of 600
  look-alike init containers stalled every filter). The admission policy
  `vgpu-limit-vgpu-containers` refuses such a pod at creation; this reader makes it a problem,
  so the extender refuses it too where the policy is off.
* Bad values: a count that is not a whole number (`vgpu.api.quantity.whole_count`) is a problem
  naming the field, and the container asks none of that resource. Problems are values: the
  extender refuses the pod with the first, the agent refuses it at Allocate, the report counts
  what can be read.

Pure: dict in, frozen value out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from vgpu.api.quantity import whole_count
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.errors import InvalidRequest
from vgpu.core.kubelet_reuse import Role, new_devices

MAX_VGPU_CONTAINERS = 64
"""The most containers (init and app) of one pod that may ask vGPU devices (module doc). The
chart's policy (charts/vgpu/templates/container-cap-policy.yaml) states the same number;
tests/deploy/test_container_cap_policy.py runs the policy and fails when the two differ."""


@dataclass(frozen=True, slots=True)
class ContainerAsk:
    """The vGPU devices one container asks of the kubelet: cores and memory blocks."""

    name: str
    cores: int = 0
    memory_blocks: int = 0
    role: Role = Role.APP
    where: str = ""
    """Its resources in the pod, e.g. `spec.initContainers[0].resources`."""

    @property
    def init(self) -> bool:
        return self.role is not Role.APP

    @property
    def asks(self) -> bool:
        return bool(self.cores or self.memory_blocks)


class Held(NamedTuple):
    """What the kubelet holds for a pod of one resource and the other."""

    cores: int
    memory_blocks: int


@dataclass(frozen=True, slots=True)
class PodAsks:
    """The containers that ask vGPU devices, in allocation order, and what could not be read."""

    containers: tuple[ContainerAsk, ...] = ()
    problems: tuple[InvalidRequest, ...] = ()

    @property
    def held(self) -> Held:
        """Cores and memory blocks the kubelet holds for the pod, after reusing init devices."""
        cores = new_devices([(c.role, c.cores) for c in self.containers])
        blocks = new_devices([(c.role, c.memory_blocks) for c in self.containers])
        return Held(sum(cores), sum(blocks))

    def check(self) -> None:
        """Raise the first problem, if any."""
        if self.problems:
            raise self.problems[0]


def role_of(raw: Mapping[str, Any], init: bool) -> Role:
    """A container's role for device reuse (pkg/api/v1/pod IsRestartableInitContainer)."""
    if not init:
        return Role.APP
    return Role.SIDECAR if raw.get("restartPolicy") == "Always" else Role.INIT


def pod_asks(pod: Mapping[str, Any], names: ResourceNames = DEFAULT_NAMES) -> PodAsks:
    """Read every container's asks; never raises on what the pod says (a malformed part is a
    problem naming it)."""
    problems: list[InvalidRequest] = []
    spec = _mapping(pod.get("spec"), "spec", problems)
    asks: list[ContainerAsk] = []
    for section, init in (("initContainers", True), ("containers", False)):
        for i, raw in enumerate(_list(spec.get(section), f"spec.{section}", problems)):
            raw = _mapping(raw, f"spec.{section}[{i}]", problems)
            where = f"spec.{section}[{i}].resources"
            resources = _mapping(raw.get("resources"), where, problems)
            limits = _mapping(resources.get("limits"), f"{where}.limits", problems)
            requests = _mapping(resources.get("requests"), f"{where}.requests", problems)
            cores = _count(limits, requests, names.cores, where, problems)
            blocks = _count(limits, requests, names.memory, where, problems)
            name = str(raw.get("name") or "")
            asks.append(ContainerAsk(name, cores, blocks, role_of(raw, init), where))
    vgpu = tuple(a for a in asks if a.asks)
    if len(vgpu) > MAX_VGPU_CONTAINERS:
        problems.append(_too_many(len(vgpu), names))
    return PodAsks(vgpu, tuple(problems))


def _too_many(count: int, names: ResourceNames = DEFAULT_NAMES) -> InvalidRequest:
    """The problem of a pod with `count` vGPU containers, more than `MAX_VGPU_CONTAINERS`."""
    return InvalidRequest(
        "spec.initContainers + spec.containers",
        f"{count} containers ask {names.domain}/ devices, more than the "
        f"{MAX_VGPU_CONTAINERS} a pod may have",
        f"split the work into pods of at most {MAX_VGPU_CONTAINERS} vGPU containers",
    )


_SHAPE_FIX = "send a v1.Pod as the API server writes it"


def _mapping(value: object, field: str, problems: list[InvalidRequest]) -> Mapping[str, Any]:
    if value is None or isinstance(value, Mapping):
        return value or {}
    problems.append(InvalidRequest(field, f"{type(value).__name__} is not an object", _SHAPE_FIX))
    return {}


def _list(value: object, field: str, problems: list[InvalidRequest]) -> list[object]:
    if value is None or isinstance(value, list):
        return value or []
    problems.append(InvalidRequest(field, f"{type(value).__name__} is not a list", _SHAPE_FIX))
    return []


def _count(
    limits: Mapping[str, Any],
    requests: Mapping[str, Any],
    name: str,
    where: str,
    problems: list[InvalidRequest],
) -> int:
    limit, request = limits.get(name), requests.get(name)
    try:
        count = None if limit is None else whole_count(limit, f"{where}.limits[{name}]")
        if request is None:
            return count or 0
        asked = whole_count(request, f"{where}.requests[{name}]")
    except InvalidRequest as err:
        problems.append(err)
        return 0
    if count is not None and asked != count:
        problems.append(
            InvalidRequest(
                f"{where}.requests[{name}]",
                f"{request} differs from the limit {limit}",
                "an extended resource's request must equal its limit; set the limit only",
            )
        )
    return count if count is not None else asked
