"""Kubelet device IDs for GPU shares, and the device lists the plugin advertises.

Two extended resources split every GPU:
- `<domain>/cores`: 100 devices per GPU, `<uuid>::c<k>` with k = 0..99 (one percent of the SMs);
- `<domain>/memory`: one device per `memory_unit_mib` block, `<uuid>::m<k>` with
  k = 0..memory_mib // memory_unit_mib - 1.

Encoding the GPU in the ID means the IDs the kubelet hands to Allocate say where the share
lives; no pod lookup is needed. IDs stay well under the kubelet's 63-character limit for NVML
UUIDs (40 chars). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Re-exported so node-side callers need one import; the names live in the cluster contract.
from vgpu.api.resources import DEFAULT_DOMAIN as DEFAULT_DOMAIN
from vgpu.api.resources import ResourceNames as ResourceNames
from vgpu.api.resources import UnitKind as UnitKind
from vgpu.core.errors import VgpuError
from vgpu.core.units import CORES_PER_GPU as CORES_PER_GPU
from vgpu.core.units import DEFAULT_MEMORY_UNIT_MIB as DEFAULT_MEMORY_UNIT_MIB
from vgpu.node.model import GpuInfo

MAX_DEVICE_ID_LEN = 63

_UNIT_ID = re.compile(r"^(?P<uuid>[^:\s]+)::(?P<kind>[cm])(?P<index>0|[1-9][0-9]{0,8})$")
"""At most 9 digits of unit index: more than any GPU has, and never past Python's int-digits
limit (a checkpoint entry with a 5,000-digit index once ended the agent's maintenance loop)."""


class DeviceIdError(VgpuError, ValueError):
    """A device ID is not of the form `<gpu-uuid>::c<k>` / `<gpu-uuid>::m<k>`."""


@dataclass(frozen=True, slots=True, order=True)
class UnitId:
    gpu_uuid: str
    kind: UnitKind
    index: int

    def __str__(self) -> str:
        return format_unit_id(self.gpu_uuid, self.kind, self.index)


@dataclass(frozen=True, slots=True)
class DeviceEntry:
    """One advertised kubelet device."""

    id: str
    healthy: bool
    numa_node: int | None


def format_unit_id(gpu_uuid: str, kind: UnitKind, index: int) -> str:
    return f"{gpu_uuid}::{kind.value}{index}"


def parse_unit_id(device_id: str) -> UnitId:
    match = _UNIT_ID.match(device_id)
    if match is None:
        raise DeviceIdError(
            f"device ID {device_id!r}: expected <gpu-uuid>::c<k> or <gpu-uuid>::m<k>"
        )
    return UnitId(match["uuid"], UnitKind(match["kind"]), int(match["index"]))


def group_by_gpu(device_ids: Iterable[str]) -> dict[str, list[UnitId]]:
    """Parse IDs and group them by GPU UUID (first-seen GPU order, units sorted by index)."""
    groups: dict[str, list[UnitId]] = {}
    for device_id in device_ids:
        unit = parse_unit_id(device_id)
        groups.setdefault(unit.gpu_uuid, []).append(unit)
    return {uuid: sorted(units) for uuid, units in groups.items()}


def _unit_index(device_id: str) -> int:
    return int(device_id[device_id.rindex("::") + 3 :])


def split_by_gpu(device_ids: Iterable[str]) -> dict[str, list[str]]:
    """Like `group_by_gpu` but keeps the ID strings: the fast path for the long lists the
    kubelet offers GetPreferredAllocation (hundreds of IDs per call). Same validation."""
    groups: dict[str, list[str]] = {}
    for device_id in device_ids:
        uuid, sep, unit = device_id.rpartition("::")
        number = unit[1:]
        if (
            not sep
            or not uuid
            or ":" in uuid
            or unit[:1] not in ("c", "m")
            or not (number.isascii() and number.isdigit() and len(number) <= 9)
            or (number[0] == "0" and number != "0")
        ):
            parse_unit_id(device_id)  # raises DeviceIdError with the standard message
        groups.setdefault(uuid, []).append(device_id)
    for ids in groups.values():
        ids.sort(key=_unit_index)
    return groups


def units_per_gpu(gpu: GpuInfo, kind: UnitKind, memory_unit_mib: int) -> int:
    """How many devices of `kind` one GPU contributes."""
    if kind is UnitKind.CORES:
        return CORES_PER_GPU
    return gpu.memory_mib // memory_unit_mib


def device_list(
    gpus: Sequence[GpuInfo],
    kind: UnitKind,
    *,
    unhealthy: Iterable[str] = (),
    memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB,
) -> list[DeviceEntry]:
    """Every device of `kind` on these GPUs; all units of an unhealthy GPU are unhealthy."""
    if memory_unit_mib <= 0:
        raise ValueError(f"memory_unit_mib: must be > 0, got {memory_unit_mib}")
    bad = frozenset(unhealthy)
    return [
        DeviceEntry(format_unit_id(gpu.uuid, kind, k), gpu.uuid not in bad, gpu.numa_node)
        for gpu in gpus
        for k in range(units_per_gpu(gpu, kind, memory_unit_mib))
    ]
