"""Value types describing the GPUs of one node, as seen by a GPU backend.

These are plain frozen dataclasses so that the pure node logic (health, labels, inventory,
device lists) never depends on NVML or on the fake backend that produced them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One physical GPU.

    `numa_node` is None when the platform reports no NUMA affinity; `compute_capability` is
    (major, minor) or None when unknown; `nvlink_peers` holds the UUIDs of GPUs this one reaches
    over NVLink.
    """

    uuid: str
    index: int
    model: str
    memory_mib: int
    pci_bus_id: str = ""
    numa_node: int | None = None
    nvlink_peers: tuple[str, ...] = ()
    compute_capability: tuple[int, int] | None = None
    mig_enabled: bool = False


@dataclass(frozen=True, slots=True)
class GpuInventory:
    """All GPUs of a node plus the driver they run on.

    `driver_version` is the kernel driver version ("550.107.02"); `cuda_version` is the highest
    CUDA version the driver supports ("12.5"). Either is "" when unknown.
    """

    gpus: tuple[GpuInfo, ...]
    driver_version: str = ""
    cuda_version: str = ""

    def by_uuid(self) -> dict[str, GpuInfo]:
        return {gpu.uuid: gpu for gpu in self.gpus}


@dataclass(frozen=True, slots=True)
class XidEvent:
    """A critical XID error reported by the driver.

    `gpu_uuid` is None when the event could not be attributed to a GPU; the health policy then
    treats every GPU as affected.
    """

    xid: int
    gpu_uuid: str | None


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    """GPU memory used by one host process on one GPU; `used_bytes` is None when NVML can't tell."""

    gpu_uuid: str
    pid: int
    used_bytes: int | None


@dataclass(frozen=True, slots=True)
class GpuStats:
    """Live load of one GPU: memory in use (bytes) and utilisation (0..1, share of the last
    sample period a kernel ran). Either is None when the driver can't tell."""

    gpu_uuid: str
    memory_used_bytes: int | None
    utilization_ratio: float | None
