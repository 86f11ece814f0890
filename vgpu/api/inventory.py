"""The GPU inventory annotation on the Node object: the node agent writes it, the extender and
the report read it. Its key is `ResourceNames.inventory` (`<domain>/gpu-inventory`).

Versioned JSON, compact and with a stable key order:

    {"version": 1, "memoryUnitMiB": 256, "gpus": [{"uuid": "GPU-...", "index": 0,
     "model": "Tesla T4", "memoryMiB": 15360, "cores": 100, "healthy": true, "numa": 0,
     "nvlinkPeers": []}]}

`numa` is null when unknown. Optional per GPU (absent when zero, so older readers, which ignore
unknown keys, keep working): `"kubeletStale": {"cores": 30, "memoryMiB": 2560}`, devices the
kubelet's checkpoint still holds for pods no longer bound to the node; the kubelet would not
offer them to a new pod until it frees them, so the extender counts them as taken
(docs/handshake.md, "Devices the kubelet still counts after its restart"). `parse_inventory` validates strictly and names the bad field, so
a broken annotation is reported, never half-used. Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vgpu.api.decode import MAX_INVENTORY_CHARS, guard, load_json
from vgpu.core.errors import InvalidInventory

INVENTORY_VERSION = 1


class InventoryError(InvalidInventory, ValueError):
    """The inventory annotation is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class InventoryGpu:
    uuid: str
    index: int
    model: str
    memory_mib: int
    cores: int
    healthy: bool
    numa: int | None
    nvlink_peers: tuple[str, ...]
    stale_cores: int = 0
    stale_memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class NodeGpuInventory:
    memory_unit_mib: int
    gpus: tuple[InventoryGpu, ...]

    def memory_units(self, gpu: InventoryGpu) -> int:
        """How many `<domain>/memory` devices the GPU advertises."""
        return gpu.memory_mib // self.memory_unit_mib


def encode_inventory(inventory: NodeGpuInventory) -> str:
    doc = {
        "version": INVENTORY_VERSION,
        "memoryUnitMiB": inventory.memory_unit_mib,
        "gpus": [_encode_gpu(g) for g in inventory.gpus],
    }
    return json.dumps(doc, separators=(",", ":"))


def _encode_gpu(g: InventoryGpu) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "uuid": g.uuid,
        "index": g.index,
        "model": g.model,
        "memoryMiB": g.memory_mib,
        "cores": g.cores,
        "healthy": g.healthy,
        "numa": g.numa,
        "nvlinkPeers": list(g.nvlink_peers),
    }
    if g.stale_cores or g.stale_memory_mib:
        doc["kubeletStale"] = {"cores": g.stale_cores, "memoryMiB": g.stale_memory_mib}
    return doc


def parse_inventory(text: object) -> NodeGpuInventory:
    """Parse and validate an annotation value; raises InventoryError naming the bad field, and
    nothing else whatever the value (`vgpu.api.decode`)."""
    doc = load_json(text, "gpu-inventory", MAX_INVENTORY_CHARS, InventoryError)
    with guard("gpu-inventory", InventoryError):
        return _inventory(doc)


def _inventory(doc: object) -> NodeGpuInventory:
    if not isinstance(doc, dict):
        raise InventoryError("gpu-inventory: expected a JSON object")
    version = doc.get("version")
    if version != INVENTORY_VERSION:
        raise InventoryError(
            f"gpu-inventory.version: unsupported {version!r}, expected {INVENTORY_VERSION}"
        )
    unit = _int(doc, "memoryUnitMiB", "gpu-inventory", minimum=1)
    raw_gpus = doc.get("gpus")
    if not isinstance(raw_gpus, list):
        raise InventoryError("gpu-inventory.gpus: expected a list")
    gpus = tuple(_gpu(g, f"gpu-inventory.gpus[{i}]") for i, g in enumerate(raw_gpus))
    if len({g.uuid for g in gpus}) != len(gpus):
        raise InventoryError("gpu-inventory.gpus: duplicate uuid")
    return NodeGpuInventory(unit, gpus)


def _gpu(raw: Any, where: str) -> InventoryGpu:
    if not isinstance(raw, dict):
        raise InventoryError(f"{where}: expected an object")
    numa = raw.get("numa")
    if numa is not None:
        numa = _int(raw, "numa", where, minimum=0)
    peers = raw.get("nvlinkPeers", [])
    if not isinstance(peers, list) or not all(isinstance(p, str) for p in peers):
        raise InventoryError(f"{where}.nvlinkPeers: expected a list of GPU UUIDs")
    healthy = raw.get("healthy")
    if not isinstance(healthy, bool):
        raise InventoryError(f"{where}.healthy: expected true or false, got {healthy!r}")
    memory_mib = _int(raw, "memoryMiB", where, minimum=0)
    cores = _int(raw, "cores", where, minimum=1)
    stale_cores, stale_mib = _stale(raw.get("kubeletStale"), f"{where}.kubeletStale")
    if stale_cores > cores or stale_mib > memory_mib:
        raise InventoryError(f"{where}.kubeletStale: more than the GPU has")
    return InventoryGpu(
        uuid=_str(raw, "uuid", where),
        index=_int(raw, "index", where, minimum=0),
        model=_str(raw, "model", where),
        memory_mib=memory_mib,
        cores=cores,
        healthy=healthy,
        numa=numa,
        nvlink_peers=tuple(peers),
        stale_cores=stale_cores,
        stale_memory_mib=stale_mib,
    )


def _stale(raw: Any, where: str) -> tuple[int, int]:
    """The optional `kubeletStale` object: (cores, memoryMiB), zeros when absent."""
    if raw is None:
        return 0, 0
    if not isinstance(raw, dict):
        raise InventoryError(f"{where}: expected an object with cores and memoryMiB")
    return _int(raw, "cores", where, minimum=0), _int(raw, "memoryMiB", where, minimum=0)


def _int(doc: dict[str, Any], key: str, where: str, *, minimum: int) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InventoryError(f"{where}.{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def _str(doc: dict[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise InventoryError(f"{where}.{key}: expected a non-empty string, got {value!r}")
    return value
