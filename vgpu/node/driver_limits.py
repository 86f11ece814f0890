"""What the driver's memory limit of a pod is, and where its cgroup is. Pure.

The limit is set in the kubelet's `PreStartContainer` call, which comes after the pod's cgroup
exists and before each container starts (Kubernetes `pkg/kubelet/cm/devicemanager/manager.go`,
`callPreStartContainerIfNeeded`; `EnsureExists` in `SyncPod` made the pod cgroup first). The
container's own cgroup does not exist yet then, so the limit is set on the POD's cgroup: the
driver charges each allocation to the cgroup of the process that owns it and checks every
ancestor's limit (a page counter up the hierarchy), so the pod limit holds for all of its
containers together, whichever of them allocates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from vgpu.core.errors import VgpuError
from vgpu.core.kubelet_reuse import Role
from vgpu.core.model import GpuShare
from vgpu.core.units import MMIB_PER_MIB

MIB = 1 << 20
QOS = ("", "burstable", "besteffort")  # Guaranteed pods sit directly under kubepods


class Limits(Protocol):
    """NVML's memory-limit setter as the daemons use it (`vgpu.adapters.dmem.NvmlLimits`)."""

    def set(self, uuid: str, cgroup: Path, *, hard: int, soft: int = 0) -> None: ...


class LimitFunctions(Limits, Protocol):
    """The setter, and whether the driver's library has both memory-limit functions."""

    @property
    def available(self) -> bool: ...


class PreStartRefused(VgpuError):
    """The driver's limit could not be set: the container must not start (fail closed)."""


def pod_cgroup_candidates(uid: str) -> list[str]:
    """Where the kubelet puts the cgroup of pod `uid`, per cgroup driver and QoS class, as
    paths below the cgroup v2 mount (the default `--cgroup-root`, `/`)."""
    if not uid or "/" in uid or uid.startswith("."):
        raise ValueError(f"pod UID {uid!r} cannot name a cgroup")
    systemd_uid = uid.replace("-", "_")
    out = []
    for qos in QOS:
        out.append(f"/kubepods/{qos}/pod{uid}" if qos else f"/kubepods/pod{uid}")
        if qos:
            out.append(
                f"/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{systemd_uid}.slice"
            )
        else:
            out.append(f"/kubepods.slice/kubepods-pod{systemd_uid}.slice")
    return out


def _bytes(mmib: int) -> int:
    return -(-mmib * MIB // MMIB_PER_MIB)


def pod_memory(containers: Iterable[tuple[Role, Sequence[GpuShare]]]) -> dict[str, int]:
    """Per GPU, the bytes the pod may hold at once: its app containers and sidecars together,
    or one regular init container with the sidecars started before it, whichever is more
    (init containers run one at a time, before the app containers)."""
    running: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for role, shares in containers:
        for share in shares:
            size = _bytes(share.memory_mmib)
            if role is Role.INIT:
                with_sidecars = size + sidecars.get(share.uuid, 0)
                init_peak[share.uuid] = max(init_peak.get(share.uuid, 0), with_sidecars)
                continue
            running[share.uuid] = running.get(share.uuid, 0) + size
            if role is Role.SIDECAR:
                sidecars[share.uuid] = sidecars.get(share.uuid, 0) + size
    gpus = running.keys() | init_peak.keys()
    return {g: max(running.get(g, 0), init_peak.get(g, 0)) for g in sorted(gpus)}


def dmem_region(pci_bus_id: str) -> str:
    """The GPU's dmem region (`nvidia/0000:3b:00.0/vidmem`) from NVML's bus ID
    (`00000000:3B:00.0`): the PCI address as sysfs writes it, 4-digit domain, lower case."""
    parts = pci_bus_id.strip().lower().split(":")
    if len(parts) != 3 or not parts[0]:
        raise ValueError(f"PCI bus ID {pci_bus_id!r} is not DOMAIN:BUS:DEVICE.FUNCTION")
    return f"nvidia/{parts[0][-4:].rjust(4, '0')}:{parts[1]}:{parts[2]}/vidmem"
