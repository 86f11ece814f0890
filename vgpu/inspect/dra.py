"""DRA-mode nodes in the report: GPUs from the node's ResourceSlice, holders from claims.

A node whose GPUs the DRA driver publishes (`vgpu.dra.slices`) has no inventory annotation; its
GPUs are the devices of its `vgpu.io` slice (withdrawn unhealthy GPUs are not there), and each
allocated claim on its pool holds the `consumedCapacity` of its devices (`vgpu.api.dra`). A
holder is named after the pod the claim is reserved for and the claim (`claim/<name>`); a claim
allocated but reserved for no pod yet is held by the claim alone and counted as pending. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from vgpu.api.dra import DRIVER, claim_shares, device_index
from vgpu.api.inventory import InventoryGpu, NodeGpuInventory
from vgpu.core.errors import VgpuError
from vgpu.core.units import CORES_PER_GPU, MMIB_PER_MIB
from vgpu.inspect.model import Holder, Problem

Obj = Mapping[str, Any]


def _attr(device: Obj, name: str) -> Any:
    value = (device.get("attributes") or {}).get(name) or {}
    return next(iter(value.values()), None) if isinstance(value, Mapping) else None


def _devices(slices: Iterable[Obj]) -> Iterator[tuple[str, Obj]]:
    """(node name, device) of every device in the `vgpu.io` ResourceSlices."""
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") == DRIVER and spec.get("nodeName"):
            for device in spec.get("devices") or []:
                yield str(spec["nodeName"]), device


def slice_inventories(slices: Iterable[Obj]) -> dict[str, NodeGpuInventory]:
    """The GPUs of each node that publishes a `vgpu.io` ResourceSlice."""
    gpus: dict[str, list[InventoryGpu]] = {}
    for node, device in _devices(slices):
        index = device_index(str(device.get("name") or ""))
        uuid = _attr(device, "uuid")
        if index is None or not isinstance(uuid, str):
            continue
        memory = _attr(device, "memoryMiB")
        gpus.setdefault(node, []).append(
            InventoryGpu(
                uuid,
                index,
                str(_attr(device, "model") or "?"),
                memory if isinstance(memory, int) else 0,
                CORES_PER_GPU,
                True,
                _attr(device, "numaNode"),
                (),
            )
        )
    return {node: NodeGpuInventory(1, tuple(found)) for node, found in gpus.items()}


def slice_memory_backends(slices: Iterable[Obj]) -> dict[str, str]:
    """What holds memory grants on each DRA node, from its devices' `memoryBackend`
    attribute: `driver` only where every device says so, else the first other value."""
    seen: dict[str, set[str]] = {}
    for node, device in _devices(slices):
        seen.setdefault(node, set()).add(str(_attr(device, "memoryBackend") or ""))
    return {
        node: "driver" if values == {"driver"} else min(values - {"driver"})
        for node, values in seen.items()
    }


def _holder_pod(claim: Obj) -> tuple[str, bool]:
    meta = claim.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    users = [
        r
        for r in (claim.get("status") or {}).get("reservedFor") or []
        if r.get("resource") == "pods"
    ]
    if not users:
        return f"{namespace}/-", False
    return ", ".join(f"{namespace}/{u.get('name')}" for u in users), True


def claim_holders(
    claims: Iterable[Obj], inventories: Mapping[str, NodeGpuInventory]
) -> tuple[dict[str, dict[str, list[Holder]]], list[Problem]]:
    """node -> GPU uuid -> holders, from allocated claims; and claims that cannot be read."""
    holders: dict[str, dict[str, list[Holder]]] = {}
    problems = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        try:
            shares = claim_shares(claim)
        except VgpuError as e:
            problems.append(Problem(key, f"unreadable claim allocation: {e}"))
            continue
        pod, reserved = _holder_pod(claim)
        for share in shares:
            inventory = inventories.get(share.pool)
            index = device_index(share.device)
            gpu = next((g for g in inventory.gpus if g.index == index), None) if inventory else None
            if gpu is None:
                continue  # another pool's or a withdrawn device
            cores = CORES_PER_GPU if share.cores is None else share.cores
            memory = gpu.memory_mib if share.memory_mib is None else share.memory_mib
            holder = Holder(
                pod, f"claim/{meta.get('name')}", cores, memory * MMIB_PER_MIB, reserved
            )
            holders.setdefault(share.pool, {}).setdefault(gpu.uuid, []).append(holder)
    return holders, problems
