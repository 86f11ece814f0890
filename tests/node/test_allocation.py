"""Default allocation policy: binpacking preference and validation of allocated IDs."""

from __future__ import annotations

import pytest

from vgpu.node.allocation import DefaultAllocationPolicy
from vgpu.node.devices import UnitKind, device_list
from vgpu.node.grants import ContainerGrant, Refusal
from vgpu.node.model import GpuInfo

GPUS = [GpuInfo(f"GPU-{c}", i, "Tesla T4", 1024) for i, c in enumerate("abc")]
CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"


def cores(uuid: str, ks: range | list[int]) -> list[str]:
    return [f"{uuid}::c{k}" for k in ks]


def all_cores() -> list[str]:
    return [d.id for d in device_list(GPUS, UnitKind.CORES)]


policy = DefaultAllocationPolicy(GPUS)


def test_preferred_binpacks_onto_fullest_gpu_that_fits() -> None:
    # GPU-a has 30 free, GPU-b 60 free, GPU-c 100 free.
    available = (
        cores("GPU-a", range(70, 100)) + cores("GPU-b", range(40, 100)) + cores("GPU-c", range(100))
    )
    assert policy.preferred(CORES, available, [], 25) == cores("GPU-a", range(70, 95))
    assert policy.preferred(CORES, available, [], 50) == cores("GPU-b", range(40, 90))
    assert policy.preferred(CORES, available, [], 100) == cores("GPU-c", range(100))


def test_preferred_multi_gpu_takes_whole_free_gpus_first() -> None:
    available = (
        cores("GPU-a", range(50, 100)) + cores("GPU-b", range(100)) + cores("GPU-c", range(100))
    )
    got = policy.preferred(CORES, available, [], 200)
    assert got == cores("GPU-b", range(100)) + cores("GPU-c", range(100))


def test_preferred_respects_must_include() -> None:
    available = all_cores()
    got = policy.preferred(CORES, available, ["GPU-b::c7"], 10)
    assert got[0] == "GPU-b::c7" and len(got) == 10
    assert all(i.startswith("GPU-b::") for i in got)
    assert len(set(got)) == 10


def test_preferred_returns_exactly_size_from_available() -> None:
    available = all_cores()[::3]
    got = policy.preferred(CORES, available, [], 40)
    assert len(got) == 40 and set(got) <= set(available)


def test_allocate_fractional_on_one_gpu() -> None:
    got = policy.allocate(CORES, [cores("GPU-b", range(30))])
    assert got == [
        ContainerGrant(
            envs={"CUDA_VISIBLE_DEVICES": "GPU-b", "VGPU_CORES": "30"},
            cdi_devices=("nvidia.com/gpu=GPU-b",),
        )
    ]


def test_allocate_whole_gpus_in_index_order() -> None:
    got = policy.allocate(CORES, [cores("GPU-c", range(100)) + cores("GPU-a", range(100))])
    assert isinstance(got, list)
    assert got[0].envs["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-c"
    assert got[0].envs["VGPU_CORES"] == "100,100"


def test_allocate_memory() -> None:
    got = policy.allocate(MEMORY, [["GPU-a::m0", "GPU-a::m3"]])
    assert got == [
        ContainerGrant(envs={"VGPU_MEMORY_GPUS": "GPU-a", "VGPU_MEMORY_LIMIT_MIB": "512"})
    ]


@pytest.mark.parametrize(
    ("resource", "ids", "fragment"),
    [
        (CORES, cores("GPU-a", range(10)) + cores("GPU-b", range(10)), "IDs span 2 GPUs"),
        (CORES, cores("GPU-a", range(100)) + cores("GPU-b", range(99)), "only 99 of 100 units"),
        (CORES, ["GPU-zz::c1"], "unknown GPU 'GPU-zz'"),
        (CORES, ["GPU-a::m1"], "'GPU-a::m1' is not a cores unit"),
        (CORES, ["GPU-a::c100"], "is not a cores unit"),
        (MEMORY, ["GPU-a::m4"], "is not a memory unit"),
        (CORES, ["nonsense"], "expected <gpu-uuid>::c<k>"),
        (CORES, ["GPU-a::c1", "GPU-a::c1"], "duplicate device IDs"),
        (CORES, [], "no device IDs"),
        ("vgpu.io/gpu", ["GPU-a::c1"], "neither vgpu.io/cores nor vgpu.io/memory"),
    ],
)
def test_allocate_refusals(resource: str, ids: list[str], fragment: str) -> None:
    got = policy.allocate(resource, [ids])
    assert isinstance(got, Refusal)
    assert fragment in got.reason
