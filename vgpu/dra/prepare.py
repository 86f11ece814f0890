"""Preparing an allocated ResourceClaim: what the kubelet is told and what the container gets.

The kubelet's `NodePrepareResources` names a claim (namespace, name, UID); the driver reads the
claim's allocation (`vgpu.api.dra.claim_shares`) and answers, per allocated device, the CDI device
IDs the container runtime must apply. A claim's devices are grouped by request: each request of
the claim becomes one CDI device, `vgpu.io/claim=<claim uid>-<request>`, whose container edits are
exactly the grant a container gets in device-plugin mode (`vgpu.node.grants.container_grant`:
visible devices, cores, memory limits, MPS or HAMi-core settings), with the GPUs in index order.
The GPUs themselves are the grant's CDI devices (`nvidia.com/gpu=<UUID>`, `vgpu.node.device_list`),
listed with it. The CDI devices are listed on the request's first result only, so a container that
uses the whole claim gets each variable once. Under the driver's memory limits the spec also
carries a `createRuntime` hook (`vgpu.dra.hook_request`): each container of the claim is created
only once the driver has set its pod's limit.

Nothing here guesses: the allocation names the pool (this node), the device (a GPU index) and
what it consumed. A claim allocated elsewhere, to an unknown or unhealthy GPU, or replaced by a
claim of the same name (different UID) is refused with a reason the kubelet shows on the pod.
Pure: returns values; the CDI spec is written and the checkpoint kept by the caller.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from vgpu.api.dra import DRIVER, DeviceShare, claim_shares, device_index
from vgpu.core.errors import InvalidRequest
from vgpu.core.units import CORES_PER_GPU, DEFAULT_MEMORY_UNIT_MIB
from vgpu.dra.hook_request import hook_edit
from vgpu.dra.pod_limits import reserved_pods
from vgpu.node.container_dirs import DirOwner
from vgpu.node.grants import ContainerGrant, GpuLimit, GrantSettings, Refusal, container_grant
from vgpu.node.model import GpuInfo

CDI_VERSION = "0.6.0"
CDI_KIND = f"{DRIVER}/claim"


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """One result of a prepared claim, as the kubelet's `Device` message carries it."""

    request: str
    pool: str
    device: str
    share_id: str | None
    cdi_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PreparedClaim:
    """A prepared claim: the kubelet's answer and the CDI spec the runtime reads."""

    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]
    cdi_spec: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """What preparation needs to know about this node."""

    pool: str
    gpus: Mapping[int, GpuInfo]
    """By GPU index (the device name's number)."""
    settings: GrantSettings = field(default_factory=GrantSettings)
    unhealthy: Collection[str] = ()
    memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB
    """The smallest memory share the slices offer (their `validRange` min and step)."""
    hook: tuple[str, str] | None = None
    """The CDI hook's program and the driver's socket (host paths), where each container of a
    claim must wait for the driver's memory limit (`vgpu.dra.hook_request`); None: no hook."""


def request_label(request: str) -> str:
    """A result's request as a name: a `firstAvailable` subrequest is recorded as
    `<request>/<subrequest>` (resource.k8s.io/v1 `DeviceRequestAllocationResult.request`), and
    neither a CDI device name nor a directory's owner may hold a '/'. Request names are DNS
    labels, so '.' keeps `a/b` apart from a request `a-b`."""
    return request.replace("/", ".")


def cdi_name(uid: str, request: str) -> str:
    """The CDI device name for one request of a claim: letters, digits, '-' and '.' only
    (container-device-interface, `pkg/parser/parser.go`, `ValidateDeviceName`)."""
    return f"{uid}-{request_label(request)}"


def _limit(share: DeviceShare, gpu: GpuInfo, unit_mib: int) -> GpuLimit | Refusal:
    """The share's limits on its GPU. Memory outside what the slice offers (at least one
    unit, at most the GPU: `vgpu.dra.slices`) is refused, never capped or granted as asked: the
    allocator never records such a value, so whoever wrote it did not use the allocator, and a
    0- or 1-byte limit or one beyond the GPU would not mean what it says."""
    cores = CORES_PER_GPU if share.cores is None else share.cores
    memory = gpu.memory_mib if share.memory_mib is None else share.memory_mib
    where = f"device {share.device}: consumedCapacity.memory {memory} MiB"
    if memory < unit_mib:
        return Refusal(f"{where} is less than the smallest share, {unit_mib} MiB; reallocate")
    if memory > gpu.memory_mib:
        return Refusal(f"{where} is more than the GPU's {gpu.memory_mib} MiB; reallocate")
    return GpuLimit(gpu.uuid, cores, memory)


def _gpu_of(share: DeviceShare, node: NodeGpus) -> GpuInfo | Refusal:
    if share.pool != node.pool:
        return Refusal(f"device {share.device} is in pool {share.pool!r}, this is {node.pool!r}")
    index = device_index(share.device)
    gpu = None if index is None else node.gpus.get(index)
    if gpu is None:
        return Refusal(f"device {share.device!r} is not a GPU of node {node.pool}")
    if gpu.uuid in node.unhealthy:
        return Refusal(f"device {share.device} ({gpu.uuid}) is unhealthy")
    return gpu


def _edits(grant: ContainerGrant) -> dict[str, Any]:
    edits: dict[str, Any] = {"env": [f"{k}={v}" for k, v in sorted(grant.envs.items())]}
    if grant.mounts:
        edits["mounts"] = [
            {
                "hostPath": m.host_path,
                "containerPath": m.container_path,
                "options": ["rbind", "ro" if m.read_only else "rw"],
            }
            for m in grant.mounts
        ]
    return edits


def claim_owner(claim: Mapping[str, Any], request: str) -> DirOwner:
    """Whose enforcement directory a claim request's is, for the device plugin's bounds
    (`vgpu.dra.claim_dirs`): the claim's namespace, its first reserved pod (the claim's own UID
    when it is reserved for none) and the request."""
    meta = claim.get("metadata") or {}
    pods = [ref.uid for ref in reserved_pods(claim)]
    pod = pods[0] if pods else str(meta.get("uid") or "")
    return DirOwner(str(meta.get("namespace") or ""), pod, request_label(request))


def prepare_claim(claim: Mapping[str, Any], uid: str, node: NodeGpus) -> PreparedClaim | Refusal:
    """The prepared form of an allocated claim read from the API server, or why not."""
    meta = claim.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    if meta.get("uid") != uid:
        return Refusal(
            f"claim {namespace}/{name} now has UID {meta.get('uid')!r}, the kubelet asked for "
            f"{uid!r}: it was deleted and created again"
        )
    try:
        shares = claim_shares(claim)
    except InvalidRequest as e:
        return Refusal(f"claim {namespace}/{name}: {e}")
    if not shares:
        return Refusal(f"claim {namespace}/{name} has no {DRIVER} device allocated")
    by_request: dict[str, list[tuple[DeviceShare, GpuInfo]]] = {}
    for share in shares:
        gpu = _gpu_of(share, node)
        if isinstance(gpu, Refusal):
            return Refusal(f"claim {namespace}/{name}: {gpu.reason}")
        by_request.setdefault(share.request, []).append((share, gpu))
    cdi_devices, first_of, gpu_devices = [], {}, {}
    for request, pairs in by_request.items():
        limits = [
            _limit(s, g, node.memory_unit_mib) for s, g in sorted(pairs, key=lambda p: p[1].index)
        ]
        refused = next((r for r in limits if isinstance(r, Refusal)), None)
        if refused is not None:
            return Refusal(f"claim {namespace}/{name}, request {request}: {refused.reason}")
        gpus = [x for x in limits if isinstance(x, GpuLimit)]
        grant = container_grant(gpus, node.settings, owner=claim_owner(claim, request))
        if isinstance(grant, Refusal):
            return Refusal(f"claim {namespace}/{name}, request {request}: {grant.reason}")
        cdi_devices.append({"name": cdi_name(uid, request), "containerEdits": _edits(grant)})
        first_of[request] = pairs[0][0]
        gpu_devices[request] = grant.cdi_devices
    devices = tuple(
        PreparedDevice(
            s.request,
            s.pool,
            s.device,
            s.share_id,
            (f"{CDI_KIND}={cdi_name(uid, s.request)}", *gpu_devices[s.request])
            if first_of[s.request] is s
            else (),
        )
        for s in shares
    )
    spec = {"cdiVersion": CDI_VERSION, "kind": CDI_KIND, "devices": cdi_devices}
    return with_hook(PreparedClaim(uid, namespace, name, devices, spec), node.hook)


def with_hook(claim: PreparedClaim, hook: tuple[str, str] | None) -> PreparedClaim:
    """The claim with its CDI spec's hook as the driver serves it now (`NodeGpus.hook`). A spec
    kept in the checkpoint from before a restart must neither name a socket no one serves any
    more (each of the claim's containers would fail) nor lack the hook the limits need."""
    spec = {k: v for k, v in claim.cdi_spec.items() if k != "containerEdits"}
    if hook is not None:
        spec["containerEdits"] = {"hooks": [hook_edit(*hook, claim.uid)]}
    return replace(claim, cdi_spec=spec)
