"""CUDA 13.4 adds CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN, "a portion of device memory,
specified by the locality domain ID", accepted wherever a device location is: cuMemCreate,
cuMemPoolCreate and the pool properties of a graph allocation node. It is device memory (the
device ordinal in the first byte of CUmemLocation's `localized` member), so it counts against the
grant of that device like any other; read as "not a device location", it passed as host
memory, uncounted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, Build, Cluster
from tests.isolation.test_memory_held import build_memload, run


@pytest.fixture(scope="session")
def memload(build: Build) -> Path:
    return build_memload(build)


def test_memory_in_a_locality_domain_counts_on_its_device(cluster: Cluster, memload: Path) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "localized", "0", str(256 * MIB))
    assert got["vmm"] == got["pool"] == got["node"] == [0]
    assert got["free_vmm"] == [768 * MIB]
    assert got["free_pool"] == [512 * MIB]
    assert got["free_node"] == [256 * MIB]
