"""CUDA 13.0's stream-ordered pools need not be on a device. cuMemGetDefaultMemPool and
cuMemGetMemPool name a location's pool: "The memory location can be of one of
CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_HOST_NUMA, or
CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN", and the allocation type "can be one of
CU_MEM_ALLOCATION_TYPE_PINNED or CU_MEM_ALLOCATION_TYPE_MANAGED", the latter with
CU_MEM_LOCATION_TYPE_NONE "to indicate no preferred location for the managed memory pool"
(cuMemPoolCreate too). A host pool's memory is host memory: it takes nothing from the grant (a
pool the library did not see created was taken to be the current device's, and its host memory
filled the GPU's grant). A managed pool's memory is managed memory, counted like
cuMemAllocManaged's, on the current context's device, wherever it is later paged (without a
device location it was taken for host memory and went uncounted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, Build, Cluster
from tests.isolation.test_memory_held import build_memload, run


@pytest.fixture(scope="session")
def memload(build: Build) -> Path:
    return build_memload(build)


def test_a_host_pool_takes_nothing_and_a_managed_pool_counts_like_managed_memory(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "offdevice", "0", str(768 * MIB))
    assert got["host"] == got["managed"] == [0]
    assert got["free_host"] == [1024 * MIB]  # pinned host memory
    assert got["device"] == [0]  # the GPU's grant is whole
    assert got["free_managed"] == [256 * MIB]
