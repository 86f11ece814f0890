"""Whether a node could ever hold what a pod requests of resources other than CPU and memory.

kube-scheduler's NodeResourcesFit refuses a node whose allocatable is less than the pod's request
of any resource, extended resources, `ephemeral-storage` and hugepages included (Kubernetes
`pkg/scheduler/framework/plugins/noderesources/fit.go`, `fitsRequest`; a resource the node does
not list counts as none). The queue pass and the gang planner model CPU, memory and GPUs
themselves; without this, a tenant's pod asking `ephemeral-storage: 1Pi` or an extended resource
no node has looked placeable, and reclaim evicted other teams' pods for a pod that never binds.

Only what the node could hold empty is judged (what other pods request is kube-scheduler's to
count as they come and go). A resource no watched node lists at all is left out: it may be one
kube-scheduler is told to ignore, or one a DRA device class provides (extended resources backed
by DRA are in no node's allocatable), and refusing it everywhere would strand the pod's gang.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from vgpu.api.quantity import BEYOND_CAPACITY, parse_quantity
from vgpu.core.errors import InvalidRequest

Amounts = tuple[tuple[str, Fraction], ...]
"""(resource name, amount) pairs, sorted by name."""

MODELLED = frozenset({"cpu", "memory", "pods"})
"""Resources the pass counts itself (CPU, memory) or that a pod does not request (pods)."""

_UNBOUNDED = Fraction(10) ** 30
"""A request `parse_quantity` finds beyond any node's capacity: more than every node has."""


def node_allocatable(obj: Mapping[str, Any]) -> Amounts:
    """A Node's `status.allocatable` except `MODELLED`; an unreadable amount is left out."""
    status = obj.get("status")
    raw = status.get("allocatable") if isinstance(status, Mapping) else None
    out: dict[str, Fraction] = {}
    for name, value in (raw if isinstance(raw, Mapping) else {}).items():
        if isinstance(name, str) and name not in MODELLED:
            try:
                out[name] = parse_quantity(value, f"status.allocatable[{name}]")
            except InvalidRequest:
                continue
    return tuple(sorted(out.items()))


def pod_requests(spec: Mapping[str, Any]) -> Amounts:
    """What a pod requests of each resource except `MODELLED`, as kube-scheduler adds it up
    (k8s.io/component-helpers/resource `PodRequests`): app containers and sidecars together, a
    regular init container beside the sidecars started before it, the larger, plus the pod's
    overhead. Zero requests are left out."""
    running: dict[str, Fraction] = {}
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for c in _list(spec.get("initContainers")):
        ask = _requests(c)
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            _add(running, ask)
            _add(sidecars, ask)
            phase = dict(sidecars)
        else:
            phase = dict(sidecars)
            _add(phase, ask)
        for name, amount in phase.items():
            peak[name] = max(peak.get(name, Fraction(0)), amount)
    for c in _list(spec.get("containers")):
        _add(running, _requests(c))
    total = {n: max(running.get(n, Fraction(0)), peak.get(n, Fraction(0))) for n in running | peak}
    _add(total, _amounts(spec.get("overhead"), "spec.overhead"))
    return tuple(sorted((n, a) for n, a in total.items() if a > 0))


def listed(allocatables: Iterable[Amounts]) -> frozenset[str]:
    """The resources some node lists (module doc: the others are not judged)."""
    return frozenset(name for amounts in allocatables for name, _ in amounts)


def has_room(requests: Amounts, allocatable: Amounts, judged: frozenset[str]) -> bool:
    """Whether a node with `allocatable` could hold `requests` of the `judged` resources."""
    have = dict(allocatable)
    return all(have.get(name, Fraction(0)) >= amount for name, amount in requests if name in judged)


def _requests(container: object) -> dict[str, Fraction]:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    raw = resources.get("requests") if isinstance(resources, Mapping) else None
    return _amounts(raw, "resources.requests")


def _amounts(raw: object, where: str) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, value in (raw if isinstance(raw, Mapping) else {}).items():
        if not isinstance(name, str) or name in MODELLED:
            continue
        try:
            out[name] = parse_quantity(value, f"{where}[{name}]")
        except InvalidRequest as e:
            # The API server refuses a malformed quantity; one past any capacity fits nowhere.
            if e.problem.endswith(BEYOND_CAPACITY):
                out[name] = _UNBOUNDED
    return out


def _add(into: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, Fraction(0)) + amount


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
