"""GPU discovery port (`GpuBackend`) and its NVML implementation.

The rest of the node side only sees the `GpuBackend` protocol and the frozen value types of
`vgpu.node.model`; NVML (the `nvidia-ml-py` binding, module `pynvml`) stays inside
`NvmlBackend`, and every `NVMLError` leaves this module as a `GpuBackendError` (chained).

Drivers differ in what their NVML exports. A function this driver's library lacks (pynvml's
`NVMLError_FunctionNotFound`) or does not support on a GPU degrades: the fact it gives is
reported unknown, with one log line per missing function, and the agent keeps running. Only
what no GPU can be offered without (count, handles, UUID, name, memory) stops discovery.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

from vgpu.core.errors import VgpuError
from vgpu.extras import install_hint
from vgpu.node.model import GpuInfo, GpuInventory, GpuStats, ProcessUsage, XidEvent

__all__ = [
    "GpuBackend",
    "GpuBackendError",
    "GpuBackendUnavailable",
    "GpuFunctionMissing",
    "GpuInfo",
    "GpuInventory",
    "GpuStats",
    "NvmlBackend",
    "ProcessUsage",
    "XidEvent",
]

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
_XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
_P2P_STATUS_OK = 0
_T = TypeVar("_T")


class GpuBackendError(VgpuError):
    """A GPU backend call failed (driver error, lost GPU, bad fake spec, ...)."""


class GpuBackendUnavailable(GpuBackendError):
    """No usable GPU driver/library on this machine."""


class GpuFunctionMissing(GpuBackendError):
    """The driver's NVML library lacks a function (an older driver than nvidia-ml-py knows)."""


class GpuBackend(Protocol):
    """What the node side needs from a GPU driver. Implementations must be thread-safe."""

    def inventory(self) -> GpuInventory:
        """Discover all GPUs and the driver version."""
        ...

    def wait_xid(self, timeout_s: float) -> list[XidEvent]:
        """Block up to `timeout_s` for critical XID events; [] on timeout."""
        ...

    def process_usage(self) -> list[ProcessUsage]:
        """GPU memory used per (GPU, host process) right now."""
        ...

    def gpu_stats(self) -> list[GpuStats]:
        """Memory in use and utilisation of every GPU right now."""
        ...

    def close(self) -> None:
        """Release driver resources; the backend is unusable afterwards."""
        ...


class NvmlBackend:
    """`GpuBackend` over NVML. Construct it once per process; `close()` shuts NVML down."""

    def __init__(self, *, sysfs_pci: Path = Path("/sys/bus/pci/devices")) -> None:
        try:
            import pynvml
        except ImportError as e:
            msg = f"nvidia-ml-py is not installed ({install_hint('node')})"
            raise GpuBackendUnavailable(msg) from e
        self._nvml: Any = pynvml
        self._sysfs_pci = sysfs_pci
        self._events: Any = None
        self._missing: set[str] = set()  # functions already reported missing (one line each)
        self._call(self._nvml.nvmlInit)

    def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            return fn(*args)
        except self._nvml.NVMLError as e:
            if isinstance(e, self._nvml.NVMLError_LibraryNotFound):
                raise GpuBackendUnavailable(f"NVML library not found: {e}") from e
            if isinstance(e, self._nvml.NVMLError_FunctionNotFound):
                msg = f"NVML {fn.__name__} is missing from this driver's libnvidia-ml"
                raise GpuFunctionMissing(msg) from e
            raise GpuBackendError(f"NVML {fn.__name__} failed: {e}") from e

    def _handles(self) -> Iterator[Any]:
        for i in range(int(self._call(self._nvml.nvmlDeviceGetCount))):
            yield self._call(self._nvml.nvmlDeviceGetHandleByIndex, i)

    def inventory(self) -> GpuInventory:
        handles = list(self._handles())
        uuids = [str(self._call(self._nvml.nvmlDeviceGetUUID, h)) for h in handles]
        gpus = tuple(self._gpu(i, h, uuids, handles) for i, h in enumerate(handles))
        cuda = self._optional(self._nvml.nvmlSystemGetCudaDriverVersion)
        driver = self._optional(self._nvml.nvmlSystemGetDriverVersion)
        return GpuInventory(
            gpus=gpus,
            driver_version="" if driver is None else str(driver),
            cuda_version="" if cuda is None else f"{int(cuda) // 1000}.{(int(cuda) % 1000) // 10}",
        )

    def _gpu(self, i: int, handle: Any, uuids: list[str], handles: list[Any]) -> GpuInfo:
        nv = self._nvml
        pci = self._optional(nv.nvmlDeviceGetPciInfo, handle)
        bus_id = "" if pci is None else str(pci.busId)
        index = self._optional(nv.nvmlDeviceGetIndex, handle)
        peers = tuple(
            uuid
            for j, (uuid, other) in enumerate(zip(uuids, handles, strict=True))
            if j != i and self._nvlinked(handle, other)
        )
        return GpuInfo(
            uuid=uuids[i],
            index=i if index is None else int(index),
            model=str(self._call(nv.nvmlDeviceGetName, handle)),
            memory_mib=int(self._call(nv.nvmlDeviceGetMemoryInfo, handle).total) // _MIB,
            pci_bus_id=bus_id,
            numa_node=self._numa_node(handle, bus_id),
            nvlink_peers=peers,
            compute_capability=self._optional(nv.nvmlDeviceGetCudaComputeCapability, handle),
            mig_enabled=self._mig_enabled(handle),
        )

    def _optional(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call an NVML getter that older drivers/GPUs may not support; None when unsupported.

        A function missing from the driver's library is logged once (the operator learns why a
        fact is absent; a poll loop does not repeat it)."""
        try:
            result = self._call(fn, *args)
        except GpuFunctionMissing as e:
            if fn.__name__ not in self._missing:
                self._missing.add(fn.__name__)
                log.warning("%s; reporting it as unknown (a newer NVIDIA driver has it)", e)
            return None
        except GpuBackendError:
            return None
        return tuple(result) if isinstance(result, list) else result

    def _nvlinked(self, a: Any, b: Any) -> bool:
        nv = self._nvml
        status = self._optional(nv.nvmlDeviceGetP2PStatus, a, b, nv.NVML_P2P_CAPS_INDEX_NVLINK)
        return bool(status == _P2P_STATUS_OK)

    def _mig_enabled(self, handle: Any) -> bool:
        mode = self._optional(self._nvml.nvmlDeviceGetMigMode, handle)
        return bool(mode) and int(mode[0]) == 1

    def _numa_node(self, handle: Any, bus_id: str) -> int | None:
        node = self._optional(getattr(self._nvml, "nvmlDeviceGetNumaNodeId", _unsupported), handle)
        if node is None:
            if not bus_id:
                return None
            # NVML busId has an 8-digit PCI domain, sysfs a 4-digit one.
            path = self._sysfs_pci / bus_id.lower().removeprefix("0000") / "numa_node"
            try:
                node = int(path.read_text().strip())
            except (OSError, ValueError):
                return None
        return int(node) if int(node) >= 0 else None

    def wait_xid(self, timeout_s: float) -> list[XidEvent]:
        events = self._event_set()
        deadline = time.monotonic() + timeout_s
        found: list[XidEvent] = []
        while True:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                event = self._nvml.nvmlEventSetWait(events, 0 if found else remaining_ms)
            except self._nvml.NVMLError_Timeout:
                return found
            except self._nvml.NVMLError as e:
                raise GpuBackendError(f"NVML event wait failed: {e}") from e
            if int(event.eventType) == _XID_CRITICAL:
                found.append(XidEvent(xid=int(event.eventData), gpu_uuid=self._event_uuid(event)))

    def _event_uuid(self, event: Any) -> str | None:
        uuid = self._optional(self._nvml.nvmlDeviceGetUUID, event.device)
        return None if uuid is None else str(uuid)

    def _event_set(self) -> Any:
        if self._events is None:
            events = self._call(self._nvml.nvmlEventSetCreate)
            for handle in self._handles():
                supported = self._optional(self._nvml.nvmlDeviceGetSupportedEventTypes, handle)
                mask = _XID_CRITICAL & int(supported or 0)
                if mask:
                    self._call(self._nvml.nvmlDeviceRegisterEvents, handle, mask, events)
            self._events = events
        return self._events

    def process_usage(self) -> list[ProcessUsage]:
        """Every process with a context on a GPU, from NVML's three running-process lists.

        NVML reference: nvmlDeviceGetComputeRunningProcesses "returns information only about
        compute running processes (e.g. CUDA application which have active context). Any
        graphics applications (e.g. using OpenGL, DirectX) won't be listed by this function";
        nvmlDeviceGetGraphicsRunningProcesses lists the "processes with a graphics context"
        (OpenGL, Vulkan: a program that never calls libcuda, so the interposer never counts
        it), nvmlDeviceGetMPSComputeRunningProcesses those "with a Multi-Process Service (MPS)
        compute context". A process with several kinds of context is in several lists, each
        time with "all of the memory used by the application": merged per (GPU, process) by
        the largest usage, never summed. The compute list is required; a graphics or MPS list
        that nvidia-ml-py or the driver lacks, or that the GPU does not support, is skipped."""
        usage: dict[tuple[str, int], int | None] = {}
        for handle in self._handles():
            uuid = str(self._call(self._nvml.nvmlDeviceGetUUID, handle))
            procs = [
                *self._call(self._nvml.nvmlDeviceGetComputeRunningProcesses, handle),
                *self._process_list("nvmlDeviceGetGraphicsRunningProcesses", handle),
                *self._process_list("nvmlDeviceGetMPSComputeRunningProcesses", handle),
            ]
            for proc in procs:
                key = (uuid, int(proc.pid))
                used = None if proc.usedGpuMemory is None else int(proc.usedGpuMemory)
                known = usage.get(key)
                usage[key] = used if known is None else max(known, used or 0)
        return [ProcessUsage(uuid, pid, used) for (uuid, pid), used in usage.items()]

    def _process_list(self, name: str, handle: Any) -> list[Any]:
        """An optional running-process list: [] when nvidia-ml-py or the driver lacks it (logged
        once per function) or the GPU does not support it; any other failure is an error."""
        fn = getattr(self._nvml, name, None)
        if fn is None:
            self._warn_missing(name, f"nvidia-ml-py {name} is missing (an older nvidia-ml-py)")
            return []
        try:
            return list(self._call(fn, handle))
        except GpuFunctionMissing as e:
            self._warn_missing(name, str(e))
            return []
        except GpuBackendError as e:
            if isinstance(e.__cause__, self._nvml.NVMLError_NotSupported):
                return []
            raise

    def _warn_missing(self, name: str, why: str) -> None:
        if name not in self._missing:
            self._missing.add(name)
            log.warning("%s; processes only it lists are not seen", why)

    def gpu_stats(self) -> list[GpuStats]:
        nv = self._nvml
        stats: list[GpuStats] = []
        for handle in self._handles():
            uuid = str(self._call(nv.nvmlDeviceGetUUID, handle))
            memory = self._optional(nv.nvmlDeviceGetMemoryInfo, handle)
            rates = self._optional(nv.nvmlDeviceGetUtilizationRates, handle)
            used = None if memory is None else int(memory.used)
            ratio = None if rates is None else int(rates.gpu) / 100
            stats.append(GpuStats(uuid, used, ratio))
        return stats

    def close(self) -> None:
        if self._events is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlEventSetFree(self._events)
            self._events = None
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()


def _unsupported(*_: Any) -> Any:
    raise GpuBackendError("not supported by this nvidia-ml-py version")
