"""Building the node's GPU inventory annotation and deciding when to patch it.

The wire format (`NodeGpuInventory`, `encode_inventory`, `parse_inventory`) is part of the
cluster contract in `vgpu.api.inventory`; this module builds the value from what the node agent
discovered. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vgpu.api.inventory import (
    InventoryError,
    InventoryGpu,
    NodeGpuInventory,
    encode_inventory,
    parse_inventory,
)
from vgpu.node.devices import CORES_PER_GPU, DEFAULT_MEMORY_UNIT_MIB
from vgpu.node.model import GpuInventory


def build_inventory(
    inventory: GpuInventory,
    *,
    unhealthy: Iterable[str] = (),
    memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB,
    stale: Mapping[str, tuple[int, int]] | None = None,
) -> NodeGpuInventory:
    """`stale`: per GPU UUID, (cores, memory MiB) the kubelet's checkpoint holds for pods gone
    from the node (`vgpu.node.checkpoint`), published as `kubeletStale`."""
    bad = frozenset(unhealthy)
    held = stale or {}
    gpus = tuple(
        InventoryGpu(
            g.uuid,
            g.index,
            g.model,
            g.memory_mib,
            CORES_PER_GPU,
            g.uuid not in bad,
            g.numa_node,
            g.nvlink_peers,
            *_capped(held.get(g.uuid, (0, 0)), g.memory_mib),
        )
        for g in sorted(inventory.gpus, key=lambda g: g.index)
    )
    return NodeGpuInventory(memory_unit_mib, gpus)


def annotation_patch(current: str | None, desired: NodeGpuInventory) -> str | None:
    """The new annotation value, or None when `current` already says the same thing."""
    if current is not None:
        try:
            if parse_inventory(current) == desired:
                return None
        except InventoryError:
            pass
    return encode_inventory(desired)


def _capped(stale: tuple[int, int], memory_mib: int) -> tuple[int, int]:
    """Never more than the GPU has (the annotation's reader rejects that)."""
    return min(stale[0], CORES_PER_GPU), min(stale[1], memory_mib)
