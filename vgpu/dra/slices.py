"""The ResourceSlice a node's DRA driver publishes: one shareable device per healthy GPU.

The kube-scheduler's allocator takes the *first* device, in slice order, that has room for a
request (see `vgpu.sim.dra`). A static order therefore piles shares onto the lowest GPU
indices whatever their fit; `order_devices` lets the driver keep its slice fullest first, so
first fit is best fit (docs/dra.md has the measured difference).

Unhealthy GPUs are withdrawn from the slice (no new allocations) and come back when healthy.
Pure: builds plain dicts in wire form.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from vgpu.api.dra import API_VERSION, CORES, DRIVER, MEMORY, device_name
from vgpu.core.units import CORES_PER_GPU
from vgpu.node.model import GpuInfo, GpuInventory

Obj = dict[str, Any]
DIGEST = f"{DRIVER}/slice-digest"
"""Annotation with a digest of the devices as we built them: the API server rewrites
quantities ("40960Mi" becomes "40Gi"), so the published devices cannot be compared as text."""


def slice_name(node: str, driver: str = DRIVER) -> str:
    """The slice's object name: one slice per node and driver."""
    return f"{node}-{driver}".replace(".", "-")


def nvlink_islands(gpus: Iterable[GpuInfo]) -> dict[str, int]:
    """Each GPU's NVLink island: the lowest index among the GPUs it reaches over NVLink,
    directly or through others (a GPU without NVLink is an island of its own)."""
    by_uuid = {g.uuid: g for g in gpus}
    island: dict[str, int] = {}
    for start in sorted(by_uuid.values(), key=lambda g: g.index):
        if start.uuid in island:
            continue
        todo = [start.uuid]
        while todo:
            uuid = todo.pop()
            if uuid in island or uuid not in by_uuid:
                continue
            island[uuid] = start.index
            todo.extend(by_uuid[uuid].nvlink_peers)
    return island


def _attributes(gpu: GpuInfo, inventory: GpuInventory, island: int, backend: str) -> Obj:
    attrs: Obj = {
        "uuid": {"string": gpu.uuid},
        "index": {"int": gpu.index},
        "model": {"string": gpu.model},
        "memoryMiB": {"int": gpu.memory_mib},
        "nvlinkIsland": {"int": island},
    }
    if gpu.numa_node is not None:
        attrs["numaNode"] = {"int": gpu.numa_node}
    if gpu.pci_bus_id:
        attrs["pciBusID"] = {"string": gpu.pci_bus_id}
    if gpu.compute_capability is not None:
        major, minor = gpu.compute_capability
        attrs["computeCapability"] = {"version": f"{major}.{minor}.0"}
    if inventory.driver_version:
        # NVIDIA versions ("550.107.02") are not semantic versions: a string, compared as such.
        attrs["driverVersion"] = {"string": inventory.driver_version}
    if backend:
        # What holds a claim's memory on this GPU: `driver` where the driver's per-cgroup limit
        # does (it holds against any program), else the mode (docs/isolation.md). A claim may
        # select on it: device.attributes["vgpu.io"].memoryBackend == "driver".
        attrs["memoryBackend"] = {"string": backend}
    return attrs


def _capacity(total: int, step: int, unit: str) -> Obj:
    value = f"{total}{unit}"
    return {
        "value": value,
        "requestPolicy": {
            "default": value,
            "validRange": {"min": f"{step}{unit}", "max": value, "step": f"{step}{unit}"},
        },
    }


def gpu_device(
    gpu: GpuInfo,
    inventory: GpuInventory,
    *,
    memory_unit_mib: int,
    island: int,
    memory_backend: str = "",
) -> Obj:
    """One GPU as a shareable device with `cores` and `memory` capacities."""
    memory = (gpu.memory_mib // memory_unit_mib) * memory_unit_mib
    return {
        "name": device_name(gpu.index),
        "allowMultipleAllocations": True,
        "attributes": _attributes(gpu, inventory, island, memory_backend),
        "capacity": {
            CORES: _capacity(CORES_PER_GPU, 1, ""),
            MEMORY: _capacity(memory, memory_unit_mib, "Mi"),
        },
    }


def order_devices(gpus: Iterable[GpuInfo], used_cores: Mapping[str, int] | None) -> list[GpuInfo]:
    """GPUs in slice order: by index, or, given the cores in use per GPU uuid, fullest first."""
    ordered = sorted(gpus, key=lambda g: g.index)
    if used_cores is None:
        return ordered
    return sorted(ordered, key=lambda g: -used_cores.get(g.uuid, 0))


def build_slice(
    node: str,
    inventory: GpuInventory,
    *,
    unhealthy: Iterable[str] = (),
    memory_unit_mib: int,
    generation: int = 1,
    node_uid: str = "",
    used_cores: Mapping[str, int] | None = None,
    driver: str = DRIVER,
    memory_backend: str = "",
) -> Obj:
    """The node's ResourceSlice (pool = node name) without server-set metadata."""
    bad = frozenset(unhealthy)
    islands = nvlink_islands(inventory.gpus)
    devices = [
        gpu_device(
            g,
            inventory,
            memory_unit_mib=memory_unit_mib,
            island=islands[g.uuid],
            memory_backend=memory_backend,
        )
        for g in order_devices(inventory.gpus, used_cores)
        if g.uuid not in bad
    ]
    digest = hashlib.sha256(json.dumps(devices, sort_keys=True).encode()).hexdigest()[:16]
    metadata: Obj = {"name": slice_name(node, driver), "annotations": {DIGEST: digest}}
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def same_devices(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether a published slice already says what `desired` says (by the devices' digest)."""
    if not current:
        return False
    have = (current.get("metadata") or {}).get("annotations") or {}
    spec, want = current.get("spec") or {}, desired["spec"]
    return bool(
        have.get(DIGEST) == desired["metadata"]["annotations"][DIGEST]
        and spec.get("nodeName") == want["nodeName"]
        and (spec.get("pool") or {}).get("name") == want["pool"]["name"]
    )
