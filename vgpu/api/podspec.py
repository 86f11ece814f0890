"""Translating a Kubernetes Pod (a plain dict) into the core's `PodRequest` and gang label.

* GPU asks: `<domain>/cores` and `<domain>/memory` (blocks of `memory_unit_mib`), read by
  `vgpu.api.podasks` as the node agent reads them, then held to the extender's unit rules
  (`vgpu.core.units`). Init containers count as the kubelet allocates them: `roles` says which
  reuse rule applies (`vgpu.core.kubelet_reuse`).
* CPU and memory: what kube-scheduler counts, the larger of app containers plus sidecars and
  the largest init phase (an init container plus the sidecars started before it), plus the pod
  overhead.
* GPU selection: annotations `vgpu.io/gpu-type`, `vgpu.io/gpu-type-exclude` ("A100|H100"),
  `vgpu.io/gpu-uuid`, `vgpu.io/gpu-uuid-exclude` (lists separated by `|` or `,`).
* Gangs: label `scheduling.x-k8s.io/pod-group` (minMember from the PodGroup object), labels
  `pod-group.scheduling.sigs.k8s.io/name` + `/min-available`, or annotations
  `vgpu.io/gang-name` + `vgpu.io/gang-size`, or Kueue's label `kueue.x-k8s.io/pod-group-name` +
  annotation `kueue.x-k8s.io/pod-group-total-count`.

Bad values raise `InvalidRequest` naming the field, before anything is changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vgpu.api.decode import MALFORMED, guard
from vgpu.api.dra import uses_claims
from vgpu.api.gang import gang_ref
from vgpu.api.nodefit import NO_TERMS, NodeTerms, pod_terms
from vgpu.api.podasks import ContainerAsk, pod_asks, role_of
from vgpu.api.podread import cores_limit, is_terminal, namespace_of
from vgpu.api.quantity import mib_ceil, milli_ceil
from vgpu.api.queues.config import queue_of
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.errors import InvalidRequest
from vgpu.core.handoff_rule import PendingContainer, pending_of
from vgpu.core.ids import GangKey, GpuUUID, PodKey, gang_key, pod_key
from vgpu.core.kubelet_reuse import Role
from vgpu.core.model import ANY_GPU, Assignment, ContainerRequest, GpuSelector, PodRequest
from vgpu.core.units import validate_cores, validate_memory

Obj = dict[str, Any]

GPU_TYPE = "vgpu.io/gpu-type"
GPU_TYPE_EXCLUDE = "vgpu.io/gpu-type-exclude"
GPU_UUID = "vgpu.io/gpu-uuid"
GPU_UUID_EXCLUDE = "vgpu.io/gpu-uuid-exclude"
POLICY = "vgpu.io/policy"
DEFAULT_SCHEDULER = "default-scheduler"
"""What the API server sets an absent spec.schedulerName to (pkg/apis/core/v1/defaults.go)."""
VGPU_SCHEDULER = "vgpu-scheduler"
"""The scheduler the extender serves unless told otherwise (`--scheduler-name`)."""
READ_METADATA = ("uid", "name", "namespace", "labels", "annotations")
"""The metadata `pod_spec` reads. It reads the pod through `read_part`, which holds these and no
other, and the parse memo's key is made of the same fields (`vgpu.extender.pods.memo`): reading a
new field starts by naming it here, and then the key holds it too."""
READ_STATUS = ("phase",)
"""The status `pod_spec` reads: whether the phase is terminal (set per version by the memo)."""


def read_part(pod: Obj) -> Obj:
    """What `pod_spec` may read of a pod: its metadata's `READ_METADATA`, its spec whole, its
    status's `READ_STATUS`. A part that is not a map is passed as it is, for the parse to refuse
    with the same message."""
    meta, status = pod.get("metadata"), pod.get("status")
    if isinstance(meta, dict):
        meta = {k: meta[k] for k in READ_METADATA if k in meta}
    if isinstance(status, dict):
        status = {k: status[k] for k in READ_STATUS if k in status}
    return {"metadata": meta, "spec": pod.get("spec"), "status": status}


@dataclass(frozen=True, slots=True)
class GangLabel:
    """A pod's gang: its key and min-member, or None when it must be read from a PodGroup."""

    key: GangKey
    namespace: str
    name: str
    min_member: int | None


@dataclass(frozen=True, slots=True)
class PodSpec:
    """What the extender needs to know about a pod, parsed once per pod version."""

    request: PodRequest
    gang: GangLabel | None
    memory_blocks: dict[str, int]
    node: str
    terminal: bool
    roles: dict[str, Role] = field(default_factory=dict)  # vGPU containers' reuse roles
    cores_limit: int | None = None  # vgpu.io/cores-limit, part of every container's grant
    claims: bool = False  # names ResourceClaims (DRA; `vgpu.extender.gangs.claims`)
    scheduler: str = DEFAULT_SCHEDULER
    """spec.schedulerName: only pods of the schedulers the extender serves hold places."""
    priority: int = 0
    """spec.priority, 0 when absent (`corev1helpers.PodPriority`)."""
    preempts: bool = True
    """Whether kube-scheduler may preempt for it (spec.preemptionPolicy is not Never)."""
    queue: str | None = None
    """Its `vgpu.io/queue` label (None: in no queue): priority preemption stays inside one
    queue (`vgpu.core.queues.preemption`)."""
    terms: NodeTerms = NO_TERMS
    """Its constraints on its node: nodeSelector, required node affinity, tolerations
    (`vgpu.api.nodefit`), for the places planned without kube-scheduler's filters (a gang's
    other members, the queue pass's)."""

    def pending(
        self, assignment: Assignment, admitted: Iterable[str] = ()
    ) -> list[PendingContainer]:
        """The pod's containers still waiting for admission, as the hand-off rule sees them."""
        order = [c.name for c in self.request.containers]  # init containers first, spec order
        return pending_of(assignment, self.memory_blocks, admitted, self.cores_limit, order)


def key_of(pod: Obj) -> PodKey:
    """The `ns/name` key of a pod dict."""
    meta = pod.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    return pod_key(namespace_of(meta), str(meta.get("name") or ""))


def node_of(spec: Obj) -> str:
    """The node a pod spec is bound to ("" when none)."""
    return str(spec.get("nodeName") or "")


def _split(value: object) -> tuple[str, ...]:
    if not isinstance(value, str):
        return ()
    return tuple(p.strip() for p in re.split(r"[|,]", value) if p.strip())


def selector_of(annotations: Obj) -> GpuSelector:
    """The GPU selector the pod's annotations ask for."""
    include, exclude = _split(annotations.get(GPU_TYPE)), _split(annotations.get(GPU_TYPE_EXCLUDE))
    uuids = frozenset(GpuUUID(u) for u in _split(annotations.get(GPU_UUID)))
    no_uuids = frozenset(GpuUUID(u) for u in _split(annotations.get(GPU_UUID_EXCLUDE)))
    if not (include or exclude or uuids or no_uuids):
        return ANY_GPU
    return GpuSelector(include, exclude, uuids, no_uuids)


def _container(ask: ContainerAsk, unit_mib: int, names: ResourceNames) -> ContainerRequest:
    """The core's request for one container, by the extender's unit rules."""
    at_cores, at_memory = f"{ask.where}[{names.cores}]", f"{ask.where}[{names.memory}]"
    cores = validate_cores(ask.cores, at_cores)
    memory = validate_memory(ask.memory_blocks * unit_mib, cores, field=at_memory)
    return ContainerRequest(ask.name, cores, memory)


def _requests(c: Obj, where: str) -> tuple[int, int]:
    """One container's CPU (milli-cores) and memory (MiB) requests."""
    req = (c.get("resources") or {}).get("requests") or {}
    cpu = milli_ceil(req["cpu"], f"{where}.cpu") if "cpu" in req else 0
    mem = mib_ceil(req["memory"], f"{where}.memory") if "memory" in req else 0
    return cpu, mem


def _host_requests(spec: Obj) -> tuple[int, int]:
    """CPU and memory as kube-scheduler counts them (k8s.io/component-helpers/resource/
    helpers.go, `PodRequests`): app containers and sidecars run together; a regular init
    container runs next to the sidecars started before it; the larger, plus the overhead."""
    running, sidecars, peak = (0, 0), (0, 0), (0, 0)
    for i, c in enumerate(spec.get("initContainers") or []):
        ask = _requests(c, f"spec.initContainers[{i}].resources.requests")
        if role_of(c, True) is Role.SIDECAR:
            running, sidecars = _add(running, ask), _add(sidecars, ask)
            phase = sidecars
        else:
            phase = _add(sidecars, ask)
        peak = (max(peak[0], phase[0]), max(peak[1], phase[1]))
    for i, c in enumerate(spec.get("containers") or []):
        running = _add(running, _requests(c, f"spec.containers[{i}].resources.requests"))
    cpu, mem = max(running[0], peak[0]), max(running[1], peak[1])
    overhead = spec.get("overhead") or {}
    if "cpu" in overhead:
        cpu += milli_ceil(overhead["cpu"], "spec.overhead.cpu")
    if "memory" in overhead:
        mem += mib_ceil(overhead["memory"], "spec.overhead.memory")
    return cpu, mem


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


def gang_of(pod: Obj) -> GangLabel | None:
    """The gang a pod belongs to, if any (min-member None: read the PodGroup)."""
    meta = pod.get("metadata") or {}
    ref = gang_ref(meta)
    if ref is None:
        return None
    ns = namespace_of(meta)
    size = None if ref.from_pod_group else _size(ref.size, ref.field)
    return GangLabel(gang_key(ns, ref.name), ns, ref.name, size)


MAX_GANG = 100_000
"""Members of one gang: beyond any cluster."""


def _size(value: object, field: str) -> int:
    text = str(value).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 6):
        shown = text if len(text) <= 20 else text[:17] + "..."
        raise InvalidRequest(field, f"{shown!r} is not a gang size", "set it, e.g. 5")
    size = int(text)
    if not 1 <= size <= MAX_GANG:
        raise InvalidRequest(field, f"{size} is not in 1..{MAX_GANG}", "set the gang size, e.g. 5")
    return size


def pod_group_min_member(group: Obj, where: str) -> int:
    """A scheduler-plugins PodGroup's `spec.minMember` as a gang size: absent or 0 is 1 (a
    gang of one), a whole number up to `MAX_GANG` is itself; anything else raises
    `InvalidRequest` naming the field (`where` names the PodGroup)."""
    spec = group.get("spec")
    value = spec.get("minMember") if isinstance(spec, dict) else None
    if value is None or value == 0:
        return 1
    field = f"{where}: spec.minMember"
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_GANG:
        shown = repr(value) if len(repr(value)) <= 20 else repr(value)[:17] + "..."
        raise InvalidRequest(
            field, f"{shown} is not a gang size in 1..{MAX_GANG}", "set minMember, e.g. 5"
        )
    return value


def pod_spec(pod: Obj, *, memory_unit_mib: int, names: ResourceNames = DEFAULT_NAMES) -> PodSpec:
    """Parse a pod dict; raises `InvalidRequest` naming the bad field, and nothing else whatever
    the object's shape (`vgpu.api.decode.guard`)."""
    with guard("Pod", _malformed, MALFORMED):
        return _pod_spec(read_part(pod), memory_unit_mib, names)


def _malformed(message: str) -> InvalidRequest:
    return InvalidRequest(
        "Pod", f"malformed object ({message.partition(': ')[2]})", "send a v1.Pod"
    )


def _pod_spec(pod: Obj, memory_unit_mib: int, names: ResourceNames) -> PodSpec:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if not meta.get("name"):
        raise InvalidRequest("Pod.metadata.name", "missing", "send the whole pod")
    annotations = meta.get("annotations") or {}
    asks = pod_asks(pod, names)
    asks.check()
    containers = [_container(a, memory_unit_mib, names) for a in asks.containers]
    cpu, mem = _host_requests(spec)
    policy = annotations.get(POLICY)
    request = PodRequest(
        key=key_of(pod),
        cpu_milli=cpu,
        memory_mib=mem,
        containers=tuple(c for c in containers if c.wants_gpu),
        selector=selector_of(annotations),
        uid=str(meta.get("uid") or ""),
        policy=str(policy) if policy else None,
    )
    return PodSpec(
        request=request,
        gang=gang_of(pod),
        memory_blocks={a.name: a.memory_blocks for a in asks.containers if a.cores},
        node=node_of(spec),
        terminal=is_terminal(pod),
        roles={a.name: a.role for a in asks.containers if a.cores},
        cores_limit=cores_limit(annotations).value,
        claims=uses_claims(spec),
        scheduler=scheduler_of(spec),
        priority=priority_of(spec),
        preempts=spec.get("preemptionPolicy") != "Never",
        queue=queue_of(meta),
        terms=pod_terms(spec),
    )


def priority_of(spec: Obj) -> int:
    """The pod's spec.priority as kube-scheduler reads it (`PodPriority`): 0 when absent; the
    API server sets it from the priority class, so anything else reads as absent too."""
    priority = spec.get("priority")
    return priority if isinstance(priority, int) and not isinstance(priority, bool) else 0


def scheduler_of(spec: Obj) -> str:
    """The pod's spec.schedulerName, defaulted as the API server defaults it."""
    name = spec.get("schedulerName")
    return name if isinstance(name, str) and name else DEFAULT_SCHEDULER
