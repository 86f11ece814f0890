"""Per-process GPU utilisation from NVML, and which container a process belongs to.

The elastic duty's outer loop (`vgpu.agent.elastic`, law in `vgpu.core.contention`) needs each
container's real share of its GPU. NVML's `nvmlDeviceGetProcessUtilization` gives, per process
that ran since `lastSeenTimeStamp` (CPU time in microseconds), its SM utilisation over the
driver's sample period; each call here passes the newest timestamp of the previous answer, so a
sample is seen once. A process's container comes from its `/proc/<pid>/mountinfo` (the bind
mount of its `limits` directory; `vgpu.node.mountinfo`): NVML reports host PIDs, so this needs
the host's PID namespace (`hostPID: true`), as the watchdog does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vgpu.adapters.gpu import GpuBackendError
from vgpu.adapters.procfs import DEFAULT_PROC_ROOT
from vgpu.node.mountinfo import container_of_mountinfo

log = logging.getLogger(__name__)
MAX_MOUNTINFO_BYTES = 1 << 20
"""How much of a process's mountinfo is read: a container's holds tens of lines (a few KiB to
tens of KiB with the driver's files); one that may mount in a user namespace of its own can
hold up to `fs.mount-max` (100,000) lines of paths up to 4 KiB each, read twice a second."""


class NvmlUtilisation:
    """`Utilisation` over NVML (the `nvidia-ml-py` binding); construct once, after nvmlInit."""

    def __init__(self, nvml: Any, proc_root: Path = DEFAULT_PROC_ROOT) -> None:
        self._nvml = nvml
        self._proc_root = proc_root
        self._seen: dict[str, int] = {}

    def shares(self) -> dict[str, dict[int, float]]:
        """GPU UUID -> host PID -> percent of the GPU it used in the newest samples.

        Raises GpuBackendError when NVML cannot answer (the caller then trusts no share)."""
        try:
            return {uuid: self._device(uuid, handle) for uuid, handle in self._handles()}
        except self._nvml.NVMLError as e:
            raise GpuBackendError(f"NVML per-process utilisation failed: {e}") from e

    def _handles(self) -> Iterator[tuple[str, Any]]:
        for i in range(int(self._nvml.nvmlDeviceGetCount())):
            handle = self._nvml.nvmlDeviceGetHandleByIndex(i)
            yield str(self._nvml.nvmlDeviceGetUUID(handle)), handle

    def _device(self, uuid: str, handle: Any) -> dict[int, float]:
        try:
            samples = self._nvml.nvmlDeviceGetProcessUtilization(handle, self._seen.get(uuid, 0))
        except self._nvml.NVMLError_NotFound:
            return {}  # NVML: no sample newer than lastSeenTimeStamp (nothing ran)
        except self._nvml.NVMLError_NotSupported:
            return {}  # e.g. a MIG-enabled GPU: its containers look alone, so scales stay neutral
        per_pid: dict[int, list[float]] = {}
        for s in samples:  # one per process (some drivers give several: their mean counts)
            self._seen[uuid] = max(self._seen.get(uuid, 0), int(s.timeStamp))
            per_pid.setdefault(int(s.pid), []).append(min(100.0, float(s.smUtil)))
        return {pid: sum(v) / len(v) for pid, v in per_pid.items()}

    def container_of(self, pid: int) -> str | None:
        """The container directory id of host process `pid`, or None (gone, in none, or a
        mountinfo past `MAX_MOUNTINFO_BYTES`: the process is then unattributed, which never
        raises a scale)."""
        try:
            data = _read_bounded(self._proc_root / str(pid) / "mountinfo", MAX_MOUNTINFO_BYTES)
        except OSError:
            return None
        if data is None:
            return None
        return container_of_mountinfo(data.decode("utf-8", "replace"))


def _read_bounded(path: Path, limit: int) -> bytes | None:
    """At most `limit` bytes of `path` (procfs answers a page or so per read); None if longer.
    Never follows a link, never blocks on a FIFO. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        return None
    finally:
        os.close(fd)


def nvml_utilisation(proc_root: Path = DEFAULT_PROC_ROOT) -> NvmlUtilisation | None:
    """The NVML source, or None (logged) where NVML cannot be loaded: the duty then leaves every
    scale neutral, as before the outer loop existed."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as e:  # ImportError, NVMLError: no driver, no library
        log.warning("per-process GPU utilisation unavailable (%s); cores are not corrected", e)
        return None
    return NvmlUtilisation(pynvml, proc_root)
