"""Managed memory (cuMemAllocManaged) is counted on the GPU it was allocated on, and may be moved
only among the container's GPUs and the host: cuMemPrefetchAsync (and its CUmemLocation form of
CUDA 12.2) and cuMemAdvise's preferred location or accessing device need no context on the GPU
they name (CUDA Driver API reference, Unified Addressing), so a GPU the container does not hold
is refused there as everywhere else (CUDA_ERROR_INVALID_DEVICE), while the host and the GPUs it
holds pass through to the driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, Build, Cluster, build_program
from tests.isolation.test_memory_held import run

INVALID_DEVICE, OOM = 101, 2
CPU = -1  # CU_DEVICE_CPU; the host location in the _v2 forms
READ_MOSTLY, PREFERRED, ACCESSED_BY = 1, 3, 5  # CUmem_advise: SET_READ_MOSTLY, ...


@pytest.fixture(scope="session")
def managed(build: Build) -> Path:
    return build_program(build, "managed")


PLACING = ["prefetch", "prefetch2", "proc"] + [
    f"{form}:{advice}" for form in ("advise", "advise2") for advice in (PREFERRED, ACCESSED_BY)
]
UNDOING = [f"{form}:{advice}" for form in ("advise", "advise2") for advice in (4, 6)]  # UNSET_*


@pytest.mark.parametrize("step", PLACING)
def test_managed_memory_cannot_be_placed_on_a_gpu_the_container_does_not_hold(
    cluster: Cluster, managed: Path, step: str
) -> None:
    container = cluster.admit([(0, 30, 1024)])  # the node's GPU 1 is reachable, not granted
    name = step.split(":")[0]
    got = run(cluster, container, managed, "0", str(256 * MIB), f"{step}:1", f"{step}:0")
    assert got == {"alloc": [0], name: [INVALID_DEVICE, 0]}


@pytest.mark.parametrize("step", PLACING + UNDOING)
def test_managed_memory_moves_freely_between_the_containers_gpus_and_the_host(
    cluster: Cluster, managed: Path, step: str
) -> None:
    container = cluster.admit([(0, 30, 1024), (1, 30, 1024)])
    name = step.split(":")[0]
    got = run(
        cluster, container, managed, "0", str(768 * MIB), *(f"{step}:{d}" for d in (1, CPU, 0))
    )
    assert got == {"alloc": [0], name: [0, 0, 0]}


@pytest.mark.parametrize("advice", [READ_MOSTLY, 2, 4, 6])  # the device is ignored, or undone
def test_advice_that_places_nothing_passes_and_managed_memory_counts_where_allocated(
    cluster: Cluster, managed: Path, advice: int
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    steps = [f"advise:{advice}:1", f"advise2:{advice}:1", f"alloc:{512 * MIB}"]
    got = run(cluster, container, managed, "0", str(768 * MIB), *steps)
    assert got == {"alloc": [0], "advise": [0], "advise2": [0], "more": [OOM]}
