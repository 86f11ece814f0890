"""The driver's memory limit of a claim's pods, decided when the claim is prepared. Pure.

In DRA mode no `PreStartContainer` is called; the kubelet calls `NodePrepareResources` from the
runtime's `SyncPod`, after `SyncPod` made the pod's cgroup (`pcm.EnsureExists`) and before the
pod's sandbox is created (Kubernetes `pkg/kubelet/kubelet.go`, `SyncPod`;
`pkg/kubelet/kuberuntime/kuberuntime_manager.go`, `PrepareDynamicResources`). So the pod's
cgroup exists and none of its containers runs yet: the limit goes on the pod's cgroup then, as
the node agent sets it at PreStart (`vgpu.node.driver_limits`).

A pod may hold several claims with shares of one GPU; its containers together may use them all,
so its limit on a GPU is the sum of its claims' memory there. The claims name their pods in
`status.reservedFor` (the scheduler reserves a claim for each pod using it before binding it).

The limit holds per pod cgroup, and pods are sibling cgroups with no common ancestor of their
own to limit, so pods sharing one claim would each get all of its memory: N pods N times the
claim (a claim may be reserved for 256). A claim holding part of a GPU is therefore used by one
pod at a time on its node (`sharing_refusal`, asked by the CDI hook before each container); a
claim of whole GPUs leaves no other claim on them and may be shared at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu.api.dra import claim_shares, device_index
from vgpu.node.driver_limits import MIB
from vgpu.node.model import GpuInfo


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod a claim is reserved for."""

    name: str
    uid: str


def reserved_pods(claim: Mapping[str, Any]) -> list[PodRef]:
    """The pods in the claim's `status.reservedFor` (other consumers are not pods: skipped)."""
    status = claim.get("status") or {}
    out = []
    for ref in status.get("reservedFor") or ():
        if not isinstance(ref, Mapping) or ref.get("resource") != "pods" or ref.get("apiGroup"):
            continue
        name, uid = str(ref.get("name") or ""), str(ref.get("uid") or "")
        if name and uid:
            out.append(PodRef(name, uid))
    return out


def pod_claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The names of the ResourceClaims a pod uses: named in its spec, or made for it from a
    template (then named in `status.resourceClaimStatuses`)."""
    names = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or ():
        if isinstance(ref, Mapping) and ref.get("resourceClaimName"):
            names.append(str(ref["resourceClaimName"]))
    for made in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        if isinstance(made, Mapping) and made.get("resourceClaimName"):
            names.append(str(made["resourceClaimName"]))
    return sorted(set(names))


def claim_memory(
    claim: Mapping[str, Any], pool: str, gpus: Mapping[int, GpuInfo]
) -> dict[str, int]:
    """Bytes per GPU UUID the claim's shares on this node (pool) hold; a share that recorded no
    memory holds its whole GPU. Raises InvalidRequest for a malformed allocation."""
    out: dict[str, int] = {}
    for share in claim_shares(claim):
        index = device_index(share.device)
        gpu = None if index is None else gpus.get(index)
        if share.pool != pool or gpu is None:
            continue
        mib = gpu.memory_mib if share.memory_mib is None else share.memory_mib
        out[gpu.uuid] = out.get(gpu.uuid, 0) + mib * MIB
    return out


def pod_limits(
    claims: Iterable[Mapping[str, Any]], pool: str, gpus: Mapping[int, GpuInfo]
) -> dict[str, int]:
    """The pod's hard limit per GPU: the sum of its claims' memory there."""
    total: dict[str, int] = {}
    for claim in claims:
        for uuid, size in claim_memory(claim, pool, gpus).items():
            total[uuid] = total.get(uuid, 0) + size
    return dict(sorted(total.items()))


def sharing_refusal(
    claim: Mapping[str, Any], others: Sequence[PodRef], pool: str, gpus: Mapping[int, GpuInfo]
) -> str | None:
    """Why a pod may not use the claim now: it holds part of a GPU here and `others` (its other
    reserved pods with a cgroup on this node) use it too (module doc); None if it may. Raises
    InvalidRequest for a malformed allocation."""
    if not others:
        return None
    by_uuid = {g.uuid: g for g in gpus.values()}
    for uuid, size in claim_memory(claim, pool, gpus).items():
        whole = by_uuid[uuid].memory_mib * MIB
        if size < whole:
            names = ", ".join(f"pod {ref.name}" for ref in others)
            return (
                f"it holds {size // MIB} MiB of GPU {uuid}'s {whole // MIB} MiB and {names} "
                "uses it on this node: the driver's memory limit is per pod, so pods sharing "
                "part of a GPU would each get all of it. Such a claim is used by one pod at a "
                "time; this container starts once the other pods have ended. Give each pod "
                "its own claim (a ResourceClaimTemplate), or share a claim of whole GPUs"
            )
    return None
