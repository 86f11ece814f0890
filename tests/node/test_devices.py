"""Device-ID codec and advertised device lists."""

from __future__ import annotations

import pytest

from vgpu.node.devices import (
    DeviceIdError,
    ResourceNames,
    UnitId,
    UnitKind,
    device_list,
    format_unit_id,
    group_by_gpu,
    parse_unit_id,
)
from vgpu.node.model import GpuInfo

GPUS = (
    GpuInfo("GPU-a", 0, "Tesla T4", 1024, numa_node=0),
    GpuInfo("GPU-b", 1, "Tesla T4", 1000, numa_node=1),
)


def test_round_trip() -> None:
    assert format_unit_id("GPU-a", UnitKind.CORES, 7) == "GPU-a::c7"
    assert parse_unit_id("GPU-a::m12") == UnitId("GPU-a", UnitKind.MEMORY, 12)
    assert str(UnitId("GPU-a", UnitKind.MEMORY, 12)) == "GPU-a::m12"


@pytest.mark.parametrize("bad", ["GPU-a", "GPU-a::x1", "GPU-a::c", "::c1", "GPU-a::c01", "a b::c1"])
def test_bad_ids(bad: str) -> None:
    with pytest.raises(DeviceIdError, match="expected <gpu-uuid>::c<k>"):
        parse_unit_id(bad)


def test_group_by_gpu_sorts_units() -> None:
    groups = group_by_gpu(["GPU-b::c3", "GPU-a::c9", "GPU-b::c1"])
    assert list(groups) == ["GPU-b", "GPU-a"]
    assert [u.index for u in groups["GPU-b"]] == [1, 3]


def test_cores_list_has_100_per_gpu_with_health_and_numa() -> None:
    devices = device_list(GPUS, UnitKind.CORES, unhealthy={"GPU-b"})
    assert len(devices) == 200
    assert devices[0].id == "GPU-a::c0" and devices[99].id == "GPU-a::c99"
    assert all(d.healthy for d in devices[:100])
    assert not any(d.healthy for d in devices[100:])
    assert {d.numa_node for d in devices[100:]} == {1}


def test_memory_list_uses_whole_blocks() -> None:
    devices = device_list(GPUS, UnitKind.MEMORY, memory_unit_mib=256)
    assert [d.id for d in devices] == [f"GPU-a::m{k}" for k in range(4)] + [
        f"GPU-b::m{k}" for k in range(3)
    ]
    with pytest.raises(ValueError, match="memory_unit_mib"):
        device_list(GPUS, UnitKind.MEMORY, memory_unit_mib=0)


def test_resource_names() -> None:
    names = ResourceNames("example.com")
    assert (names.cores, names.memory) == ("example.com/cores", "example.com/memory")
    assert names.kind_of("example.com/memory") is UnitKind.MEMORY
    with pytest.raises(ValueError, match="neither"):
        names.kind_of("example.com/gpu")
