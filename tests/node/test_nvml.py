"""NvmlBackend on a real NVIDIA GPU (skipped where NVML can't initialise)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vgpu.adapters.gpu import GpuBackendError, NvmlBackend
from vgpu.node.devices import UnitKind, device_list
from vgpu.node.labels import node_labels

pytestmark = pytest.mark.nvml


@pytest.fixture(scope="module")
def nvml() -> Iterator[NvmlBackend]:
    try:
        backend = NvmlBackend()
    except GpuBackendError as e:
        pytest.skip(f"NVML not available: {e}")
    yield backend
    backend.close()


def test_inventory(nvml: NvmlBackend) -> None:
    inv = nvml.inventory()
    assert inv.gpus, "NVML initialised but reported no GPUs"
    assert inv.driver_version.split(".")[0].isdigit()
    assert inv.cuda_version.split(".")[0].isdigit()
    for gpu in inv.gpus:
        assert gpu.uuid.startswith("GPU-")
        assert gpu.memory_mib > 1024
        assert gpu.pci_bus_id.count(":") == 2
        assert gpu.numa_node is None or gpu.numa_node >= 0
        assert gpu.uuid not in gpu.nvlink_peers
    assert int(node_labels(inv)["vgpu.io/gpu.count"]) == len(inv.gpus)
    assert len(device_list(inv.gpus, UnitKind.CORES)) == 100 * len(inv.gpus)


def test_xid_wait_times_out_quietly(nvml: NvmlBackend) -> None:
    assert nvml.wait_xid(0.2) == []


def test_process_usage(nvml: NvmlBackend) -> None:
    uuids = {g.uuid for g in nvml.inventory().gpus}
    for usage in nvml.process_usage():
        assert usage.gpu_uuid in uuids and usage.pid > 0


def test_gpu_stats(nvml: NvmlBackend) -> None:
    gpus = nvml.inventory().by_uuid()
    stats = nvml.gpu_stats()
    assert [s.gpu_uuid for s in stats] == list(gpus)
    for s in stats:
        total = gpus[s.gpu_uuid].memory_mib * 1024 * 1024
        assert s.memory_used_bytes is None or 0 <= s.memory_used_bytes <= total + (1 << 20)
        assert s.utilization_ratio is None or 0.0 <= s.utilization_ratio <= 1.0
