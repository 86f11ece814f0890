"""Mode vgpu-core: the Allocate answer mounts exactly the contract's paths with the container's
limits written, and every container the agent admits gets its mode's enforcement, also one
admitted without an assignment (`--allow-unassigned`)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vgpu.adapters.container_dirs import ContainerDirs, read_limits
from vgpu.node.allocation import DefaultAllocationPolicy
from vgpu.node.grants import (
    MIB,
    ContainerGrant,
    GpuLimit,
    GrantMode,
    GrantSettings,
    Refusal,
    container_grant,
)
from vgpu.node.handoff.admissions import Handoff
from vgpu.node.handoff.allocate import HandoffPolicy
from vgpu.node.limits_file import DeviceLimit
from vgpu.node.model import GpuInfo
from vgpu.node.vgpucore import (
    ACTIVITY_IN_CONTAINER,
    LIBRARY_IN_CONTAINER,
    LIMITS_IN_CONTAINER,
    PRELOAD_IN_CONTAINER,
    SHARED_IN_CONTAINER,
    STATE_IN_CONTAINER,
    VgpuCore,
)

CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"
U0, U1 = (f"GPU-{uuid.UUID(int=n)}" for n in (10, 11))
GPUS = [GpuInfo(U0, 0, "Tesla T4", 15360), GpuInfo(U1, 1, "Tesla T4", 15360)]
LIB, PRELOAD = "/var/lib/vgpu/lib/libvgpu-core.so", "/var/lib/vgpu/lib/ld.so.preload"


def core(state: Path, **kw: int) -> VgpuCore:
    return VgpuCore(LIB, PRELOAD, ContainerDirs(state, **kw))  # type: ignore[arg-type]


def mounts_by_path(grant: ContainerGrant) -> dict[str, tuple[str, bool]]:
    return {m.container_path: (m.host_path, m.read_only) for m in grant.mounts}


def limits_of(grant: ContainerGrant) -> tuple[DeviceLimit, ...]:
    return read_limits(Path(mounts_by_path(grant)[LIMITS_IN_CONTAINER][0]))


def test_the_answer_mounts_the_library_preload_and_limits_read_only_and_shared_writable(
    tmp_path: Path,
) -> None:
    gpus = [GpuLimit(U0, 30, 4096), GpuLimit(U1, 30, 2048)]
    grant = container_grant(
        gpus, GrantSettings(GrantMode.VGPU_CORE, core=core(tmp_path)), cores_limit=60
    )
    assert isinstance(grant, ContainerGrant)
    m = mounts_by_path(grant)
    assert set(m) == {
        LIBRARY_IN_CONTAINER,
        PRELOAD_IN_CONTAINER,
        LIMITS_IN_CONTAINER,
        STATE_IN_CONTAINER,
        ACTIVITY_IN_CONTAINER,
    }
    assert m[LIBRARY_IN_CONTAINER] == (LIB, True) and m[PRELOAD_IN_CONTAINER] == (PRELOAD, True)
    assert m[LIMITS_IN_CONTAINER][1] is True
    for path in (STATE_IN_CONTAINER, ACTIVITY_IN_CONTAINER):
        assert m[path][1] is False
        assert Path(m[path][0]).parent == Path(m[STATE_IN_CONTAINER][0]).parent
    assert (
        grant.envs["LD_PRELOAD"] == LIBRARY_IN_CONTAINER and grant.envs["VGPU_MODE"] == "vgpu-core"
    )
    assert limits_of(grant) == (
        DeviceLimit(U0, 4096 * MIB, 30, 60, 30),
        DeviceLimit(U1, 2048 * MIB, 30, 60, 30),
    )


def test_each_answer_gets_its_own_directory(tmp_path: Path) -> None:
    settings_ = GrantSettings(GrantMode.VGPU_CORE, core=core(tmp_path))
    a = container_grant([GpuLimit(U0, 30, 4096)], settings_)
    b = container_grant([GpuLimit(U0, 30, 4096)], settings_)
    assert isinstance(a, ContainerGrant) and isinstance(b, ContainerGrant)
    assert mounts_by_path(a)[LIMITS_IN_CONTAINER] != mounts_by_path(b)[LIMITS_IN_CONTAINER]


def test_without_the_library_or_past_the_directory_bound_allocate_is_refused(
    tmp_path: Path,
) -> None:
    gpus = [GpuLimit(U0, 30, 4096)]
    assert isinstance(container_grant(gpus, GrantSettings(GrantMode.VGPU_CORE)), Refusal)
    bounded = GrantSettings(GrantMode.VGPU_CORE, core=core(tmp_path, max_dirs=1))
    assert isinstance(container_grant(gpus, bounded), ContainerGrant)
    refusal = container_grant(gpus, bounded)
    assert isinstance(refusal, Refusal) and "bound is 1" in refusal.reason


def test_a_gpu_uuid_outside_the_contract_is_refused_not_written(tmp_path: Path) -> None:
    refusal = container_grant(
        [GpuLimit("GPU-fake", 30, 4096)], GrantSettings(GrantMode.VGPU_CORE, core=core(tmp_path))
    )
    assert isinstance(refusal, Refusal) and "GPU-fake" in refusal.reason
    assert list(ContainerDirs(tmp_path).ids()) == []


def enforced(mode: GrantMode, grant: ContainerGrant) -> bool:
    """Whether `grant` carries `mode`'s enforcement (what the container's limits come from)."""
    if mode is GrantMode.VGPU_CORE:
        return LIMITS_IN_CONTAINER in mounts_by_path(grant)
    if mode is GrantMode.HAMI:
        return "CUDA_DEVICE_SM_LIMIT" in grant.envs
    if mode is GrantMode.MPS:
        return "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" in grant.envs
    return True


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(
    mode=st.sampled_from([m for m in GrantMode if m.enforcing]),
    gpu=st.sampled_from([U0, U1]),
    n=st.integers(1, 100),
    handoff=st.booleans(),
)
def test_every_unassigned_container_admitted_in_an_enforcing_mode_is_enforced(
    tmp_path: Path, mode: GrantMode, gpu: str, n: int, handoff: bool
) -> None:
    """Cores decide alone: the container gets its cores and the memory that share takes
    without a memory ask; an unassigned memory Allocate, which cannot be tied to them, is
    refused whatever order the kubelet calls in."""
    settings_ = GrantSettings(mode, core=core(tmp_path))
    policy = (
        HandoffPolicy(
            Handoff("n", b"k", clock=lambda: 0.0, grace_s=5.0),
            GPUS,
            memory_unit_mib=1024,
            settings=settings_,
            allow_unassigned=True,
        )
        if handoff
        else DefaultAllocationPolicy(GPUS, memory_unit_mib=1024, settings=settings_)
    )
    grants = policy.allocate(CORES, [[f"{gpu}::c{k}" for k in range(n)]])
    assert not isinstance(grants, Refusal), grants
    assert enforced(mode, grants[0])
    if mode is GrantMode.VGPU_CORE:
        assert limits_of(grants[0]) == (DeviceLimit(gpu, 15360 * n // 100 * MIB, n, n, n),)
    refusal = policy.allocate(MEMORY, [[f"{gpu}::m0"]])
    assert isinstance(refusal, Refusal) and "cannot be tied to its cores" in refusal.reason


def test_plain_mode_keeps_the_unassigned_variables_of_each_resource() -> None:
    policy = DefaultAllocationPolicy(GPUS, memory_unit_mib=1024)
    cores = policy.allocate(CORES, [[f"{U0}::c{k}" for k in range(30)]])
    memory = policy.allocate(MEMORY, [[f"{U0}::m0", f"{U0}::m1"]])
    assert not isinstance(cores, Refusal) and not isinstance(memory, Refusal)
    assert cores[0].envs == {
        "CUDA_VISIBLE_DEVICES": U0,
        "VGPU_CORES": "30",
    }
    assert memory[0].envs == {"VGPU_MEMORY_GPUS": U0, "VGPU_MEMORY_LIMIT_MIB": "2048"}
    assert cores[0].mounts == () == memory[0].mounts


@pytest.mark.parametrize("mode", [m for m in GrantMode if m.enforcing])
def test_an_assigned_grant_in_an_enforcing_mode_is_enforced(
    tmp_path: Path, mode: GrantMode
) -> None:
    grant = container_grant([GpuLimit(U0, 30, 4096)], GrantSettings(mode, core=core(tmp_path)))
    assert isinstance(grant, ContainerGrant) and enforced(mode, grant)


def test_the_shared_files_not_their_directory_are_mounted_so_nothing_can_be_added_there(
    tmp_path: Path,
) -> None:
    """/run/vgpu-shared/ was a world-writable host directory mounted read-write, outside
    the kubelet's ephemeral-storage accounting, so a container could fill the node's disk. The
    library needs two files there (vgpu-core/src/region.c opens `state` and `activity`): the agent
    creates them, empty and writable by any user, and mounts each; the directory is not mounted."""
    grant = container_grant(
        [GpuLimit(U0, 30, 4096)], GrantSettings(GrantMode.VGPU_CORE, core=core(tmp_path))
    )
    assert isinstance(grant, ContainerGrant)
    m = mounts_by_path(grant)
    assert not any(p == SHARED_IN_CONTAINER or p == SHARED_IN_CONTAINER + "/" for p in m)
    for path in (STATE_IN_CONTAINER, ACTIVITY_IN_CONTAINER):
        host = Path(m[path][0])
        assert host.is_file() and not host.is_symlink() and host.stat().st_size == 0
        assert host.stat().st_mode & 0o777 == 0o666 and m[path][1] is False
