"""The driver's per-cgroup memory limits: NVML's two functions over ctypes, and the cgroup v2
files that say whether the node has them.

NVML (NVML API reference, `nvmlDeviceSetMemoryLimits_v1`, `nvmlDeviceGetMemoryLimits_v1`,
`nvmlSetMemoryLimits_v1_t`, `nvmlGetMemoryLimits_v1_t`): "Set the memory limits of the device
for the cgroup partition ... Requires root/admin permissions ... MIG handles are not supported";
the struct holds the cgroup's full sysfs path, then the soft and hard limits in bytes; "to clear
the limits, set softLimit to 0, and hardLimit to NVML_DEVICE_MEMORY_LIMIT_MAX. Removing the cgroup
will also clear any limits". ctypes rather than pynvml: the binding may predate the functions,
and whether the driver's library exports them is itself a fact the mode decision needs.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from vgpu.core.errors import ConfigError
from vgpu.node.driver_limits import LimitFunctions, dmem_region, pod_cgroup_candidates
from vgpu.node.driver_mode import (
    Choice,
    DriverLimits,
    DriverLimitsUnavailable,
    GpuFacts,
    NodeFacts,
    choose,
)
from vgpu.node.model import GpuInventory

log = logging.getLogger(__name__)

CGROUPFS = Path("/sys/fs/cgroup")
LIMIT_MAX = (1 << 64) - 1  # NVML_DEVICE_MEMORY_LIMIT_MAX: all ones (the reference gives no value)
_SET, _GET = "nvmlDeviceSetMemoryLimits_v1", "nvmlDeviceGetMemoryLimits_v1"


class _SetLimits(ctypes.Structure):
    _fields_ = [
        ("nameSpace", ctypes.c_char_p),
        ("softLimit", ctypes.c_ulonglong),
        ("hardLimit", ctypes.c_ulonglong),
    ]


class _GetLimits(ctypes.Structure):
    _fields_ = [
        ("nameSpace", ctypes.c_char_p),
        ("softLimit", ctypes.c_ulonglong),
        ("hardLimit", ctypes.c_ulonglong),
        ("currentUsed", ctypes.c_ulonglong),
    ]


class LimitError(Exception):
    """An NVML call about memory limits failed; the message names the call and the code."""


class NvmlLimits:
    """The two NVML functions on one loaded `libnvidia-ml.so.1` (initialised here)."""

    def __init__(self, library: str = "libnvidia-ml.so.1") -> None:
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as e:
            raise LimitError(f"cannot load {library}: {e}") from None
        self._check("nvmlInit_v2", self._lib.nvmlInit_v2())

    @property
    def available(self) -> bool:
        """Whether this driver's library exports both functions."""
        return all(hasattr(self._lib, name) for name in (_SET, _GET))

    def _check(self, call: str, rc: int) -> None:
        if rc != 0:
            self._lib.nvmlErrorString.restype = ctypes.c_char_p
            text = self._lib.nvmlErrorString(rc).decode(errors="replace")
            raise LimitError(f"NVML {call} failed: {text} (code {rc})")

    def _device(self, uuid: str) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        rc = self._lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(handle))
        self._check(f"nvmlDeviceGetHandleByUUID({uuid})", rc)
        return handle

    def set(self, uuid: str, cgroup: Path, *, hard: int, soft: int = 0) -> None:
        if not self.available:
            raise LimitError(f"libnvidia-ml lacks {_SET}")
        limits = _SetLimits(str(cgroup).encode(), soft, hard)
        rc = getattr(self._lib, _SET)(self._device(uuid), ctypes.byref(limits))
        self._check(f"{_SET}({uuid}, {cgroup})", rc)

    def get(self, uuid: str, cgroup: Path) -> tuple[int, int, int]:
        """(soft, hard, currently used) bytes of `cgroup` on GPU `uuid`."""
        if not self.available:
            raise LimitError(f"libnvidia-ml lacks {_GET}")
        limits = _GetLimits(str(cgroup).encode(), 0, 0, 0)
        rc = getattr(self._lib, _GET)(self._device(uuid), ctypes.byref(limits))
        self._check(f"{_GET}({uuid}, {cgroup})", rc)
        return limits.softLimit, limits.hardLimit, limits.currentUsed


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def gather_facts(
    inventory: GpuInventory, nvml_limits: bool, cgroupfs: Path = CGROUPFS
) -> NodeFacts:
    """The node's facts for `vgpu.node.driver_mode.choose`, read once at start."""
    controllers = _read(cgroupfs / "cgroup.controllers").split()
    regions = {line.split()[0] for line in _read(cgroupfs / "dmem.capacity").splitlines() if line}
    gpus = []
    for gpu in inventory.gpus:
        try:
            region = dmem_region(gpu.pci_bus_id)
        except ValueError:
            region = f"(no PCI bus ID for {gpu.uuid})"
        gpus.append(GpuFacts(gpu.uuid, region, gpu.mig_enabled, region in regions))
    return NodeFacts(
        driver_version=inventory.driver_version,
        nvml_limits=nvml_limits,
        cgroup_v2=(cgroupfs / "cgroup.controllers").is_file(),
        dmem="dmem" in controllers,
        gpus=tuple(gpus),
        kubepods=any((cgroupfs / root).is_dir() for root in ("kubepods.slice", "kubepods")),
    )


def decide(
    requested: DriverLimits,
    inventory: GpuInventory,
    cores: str,
    *,
    library: str = "libnvidia-ml.so.1",
    cgroupfs: Path = CGROUPFS,
    usable: bool = True,
    nvml: LimitFunctions | None = None,
    cores_why: str = "",
) -> tuple[Choice, LimitFunctions | None]:
    """The node's memory backend, announced in one log line that says what and why, with the
    NVML functions that set the limits when the driver holds memory. The node agent and the DRA
    driver both start with it, so a node decides alike whichever serves it. `usable`: False
    where the daemon cannot find a container's pod (the agent without its hand-off records).
    `nvml`: the functions already opened (tests); else `library` is loaded here. `cores_why`:
    how `--mode auto` chose the mode, for the same line."""
    facts = NodeFacts("", False, False, False)
    if requested is not DriverLimits.OFF:
        if nvml is None:
            try:
                nvml = NvmlLimits(library)
            except LimitError as e:
                log.debug("driver memory limits: %s", e)
        available = nvml is not None and nvml.available
        facts = replace(gather_facts(inventory, available, cgroupfs), pods_known=usable)
    choice = memory_backend(requested, facts, cores, cores_why)
    return choice, nvml if choice.driver_limits else None


def memory_backend(
    requested: DriverLimits, facts: NodeFacts, cores: str, cores_why: str = ""
) -> Choice:
    """`choose`, announced in the one log line; `on` without the capability: ConfigError."""
    try:
        choice = choose(requested, facts)
    except DriverLimitsUnavailable as e:
        raise ConfigError(str(e)) from None
    log.info("%s", choice.line(cores, cores_why))
    return choice


def pod_cgroup(uid: str, cgroupfs: Path = CGROUPFS) -> Path | None:
    """The existing cgroup directory of pod `uid` (systemd or cgroupfs layout), or None."""
    for candidate in pod_cgroup_candidates(uid):
        path = cgroupfs / candidate.lstrip("/")
        if path.is_dir():
            return path
    return None


def set_pod_limits(
    nvml: NvmlLimits, cgroup: Path, limits: dict[str, int], *, soft: bool = False
) -> Sequence[str]:
    """Set each GPU's hard limit (and its soft limit to the same bytes when `soft`) on the
    pod's cgroup; returns the GPUs set. Raises LimitError at the first failure."""
    done = []
    for uuid, hard in sorted(limits.items()):
        nvml.set(uuid, cgroup, hard=hard, soft=hard if soft else 0)
        done.append(uuid)
    return done
