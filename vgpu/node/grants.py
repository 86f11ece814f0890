"""What a container gets for its GPU shares: environment variables, mounts and annotations.

A `ContainerGrant` is plain data; the kubelet adapter turns it into a
`ContainerAllocateResponse`. The kubelet calls Allocate once per resource and merges the
answers, keeping the first value of a variable set twice (in no fixed order), so the cores and
memory grants of one container never set the same variable.

With the hand-off (`vgpu.node.handoff.admissions`) the **cores** grant carries the container's whole grant,
read from its signed assignment (a container without a memory ask makes no memory Allocate):

| variable | value |
|---|---|
| `CUDA_VISIBLE_DEVICES` | GPU UUIDs, comma-separated, by GPU index |
| `cdi_devices` (not a variable) | `nvidia.com/gpu=<UUID>` per GPU, same order: the runtime injects these (`vgpu.node.device_list`; with the opt-in `envvar` strategy `NVIDIA_VISIBLE_DEVICES` instead) |
| `VGPU_CORES` | guaranteed cores (percent of SMs) per visible GPU, same order |
| `VGPU_CORES_LIMIT` | elastic upper bound from the pod annotation `vgpu.io/cores-limit`, if set |
| `VGPU_MEMORY_LIMIT_MIB`, `VGPU_MEMORY_LIMIT_BYTES` | memory limit per visible GPU, same order |
| `VGPU_MODE` | `plain`, `mps`, `hami` or `vgpu-core` |
| mode `vgpu-core` | `LD_PRELOAD`, and the contract's four mounts (vgpu-core/README.md) with the limits written in a per-container directory (`vgpu.node.vgpucore`); without the library installed every Allocate is refused |
| mode `mps` | `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` (limit or cores), `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` (`0=4096M,1=…`, by visible index), `CUDA_MPS_PIPE_DIRECTORY` plus a mount of the node's MPS pipe directory |
| mode `hami` | `CUDA_VISIBLE_DEVICES` as indices `0,1,…` (HAMi-core parses entries with `atoi`), `CUDA_DEVICE_MEMORY_LIMIT_<i>=<n>m` and `CUDA_DEVICE_SM_LIMIT_<i>` per visible index, `CUDA_DEVICE_SM_LIMIT` (limit or cores); with `GrantSettings.hami`, HAMi-core's library mounted and preloaded and a per-container cache mounted writable (`vgpu.node.hami`) |

The hand-off **memory** grant only confirms where the blocks are: `VGPU_MEMORY_GPUS` and
`VGPU_MEMORY_BLOCKS`. Without the hand-off (no cluster credentials) the default policy grants
`VGPU_CORES` with the visible devices on cores and `VGPU_MEMORY_GPUS` / `VGPU_MEMORY_LIMIT_MIB`
on memory; in an enforcing mode they get the mode's enforcement too (`vgpu.node.unassigned`).
Pure: no I/O, except through the injected `Enforcer` (it writes the container's limits).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from vgpu.core.units import CORES_PER_GPU
from vgpu.node.container_dirs import DirOwner
from vgpu.node.device_list import DeviceList

MIB = 1024 * 1024
DEFAULT_MPS_PIPE_DIR = "/tmp/nvidia-mps"


class GrantMode(enum.Enum):
    """How the node enforces shares: plain variables only, NVIDIA MPS, HAMi-core, or vgpu's
    own interposer (vgpu-core)."""

    PLAIN = "plain"
    MPS = "mps"
    HAMI = "hami"
    VGPU_CORE = "vgpu-core"

    @property
    def enforcing(self) -> bool:
        """Whether the mode limits what a container uses (plain only passes variables)."""
        return self is not GrantMode.PLAIN


@dataclass(frozen=True, slots=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class ContainerGrant:
    envs: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    cdi_devices: tuple[str, ...] = ()  # fully qualified CDI names the runtime injects


@dataclass(frozen=True, slots=True)
class Refusal:
    """Allocation refused; `reason` goes back to the kubelet and ends up in the pod's status."""

    reason: str


@dataclass(frozen=True, slots=True)
class GpuLimit:
    """One visible GPU of a container: guaranteed cores and memory limit in MiB."""

    uuid: str
    cores: int
    memory_mib: int


class Preload(Protocol):
    """A library mode hami loads in every container: its variables and mounts, and a writable
    per-container cache (HAMi-core's shared accounting file).

    `vgpu.node.hami.HamiCore` is the one implementation; naming it through this protocol keeps
    the arrow one way (hami builds `Mount`s, grants only asks for them).
    """

    def envs(self) -> dict[str, str]: ...

    def mounts(self) -> tuple[Mount, ...]: ...

    def cache(self, owner: DirOwner | None = None) -> ContainerGrant | Refusal: ...


class Enforcer(Protocol):
    """What mode vgpu-core adds to a container's grant after preparing its limits.

    `vgpu.node.vgpucore.VgpuCore` is the implementation (it writes the limits file: the one
    piece of I/O a grant causes); naming it through this protocol keeps the arrow one way.
    """

    def enforce(
        self, gpus: Sequence[GpuLimit], cores_limit: int | None, owner: DirOwner | None = None
    ) -> ContainerGrant | Refusal: ...


@dataclass(frozen=True, slots=True)
class GrantSettings:
    mode: GrantMode = GrantMode.PLAIN
    mps_pipe_dir: str = DEFAULT_MPS_PIPE_DIR  # on the host; mounted at the same path
    hami: Preload | None = None  # HAMi-core on the node: mode hami then preloads it
    core: Enforcer | None = None  # vgpu-core installed on the node: mode vgpu-core needs it
    devices: DeviceList = field(default_factory=DeviceList)  # how the runtime learns the GPUs
    mode_why: str = ""  # how `--mode auto` chose `mode` ("" when named), for the start-up line


def cores_grant(
    shares: Sequence[tuple[str, int]], devices: DeviceList | None = None
) -> ContainerGrant:
    """Default-policy grant for (gpu_uuid, cores) pairs, already in GPU index order."""
    devices = devices or DeviceList()
    uuids = [uuid for uuid, _ in shares]
    return ContainerGrant(
        envs={
            **devices.envs(uuids),
            "CUDA_VISIBLE_DEVICES": ",".join(uuids),
            "VGPU_CORES": ",".join(str(cores) for _, cores in shares),
        },
        cdi_devices=devices.cdi_devices(uuids),
    )


def memory_grant(shares: Sequence[tuple[str, int]]) -> ContainerGrant:
    """Default-policy grant for (gpu_uuid, memory MiB) pairs, already in GPU index order."""
    return ContainerGrant(
        envs={
            "VGPU_MEMORY_GPUS": ",".join(uuid for uuid, _ in shares),
            "VGPU_MEMORY_LIMIT_MIB": ",".join(str(mib) for _, mib in shares),
        }
    )


def memory_ack_grant(blocks: Sequence[tuple[str, int]]) -> ContainerGrant:
    """Hand-off memory grant: where the (gpu_uuid, blocks) are; limits come with the cores grant."""
    return ContainerGrant(
        envs={
            "VGPU_MEMORY_GPUS": ",".join(uuid for uuid, _ in blocks),
            "VGPU_MEMORY_BLOCKS": ",".join(str(n) for _, n in blocks),
        }
    )


def _joined(values: Sequence[object]) -> str:
    return ",".join(str(v) for v in values)


def container_grant(
    gpus: Sequence[GpuLimit],
    settings: GrantSettings,
    *,
    cores_limit: int | None = None,
    owner: DirOwner | None = None,
) -> ContainerGrant | Refusal:
    """The full grant of a container holding `gpus` (in GPU index order); `owner`: whose
    container it is, for the bounds on per-container directories (None: not known)."""
    if not gpus:
        return Refusal("no GPU in the assignment")
    guaranteed = max(g.cores for g in gpus)
    if cores_limit is not None and not guaranteed <= cores_limit <= CORES_PER_GPU:
        return Refusal(
            f"vgpu.io/cores-limit={cores_limit} is below the {guaranteed} cores the container "
            f"asks; set it between {guaranteed} and {CORES_PER_GPU} or remove it"
        )
    uuids = [g.uuid for g in gpus]
    envs = {
        **settings.devices.envs(uuids),
        "CUDA_VISIBLE_DEVICES": _joined(uuids),
        "VGPU_CORES": _joined([g.cores for g in gpus]),
        "VGPU_MEMORY_LIMIT_MIB": _joined([g.memory_mib for g in gpus]),
        "VGPU_MEMORY_LIMIT_BYTES": _joined([g.memory_mib * MIB for g in gpus]),
        "VGPU_MODE": settings.mode.value,
    }
    if cores_limit is not None:
        envs["VGPU_CORES_LIMIT"] = str(cores_limit)
    sm = cores_limit if cores_limit is not None else guaranteed
    mounts: tuple[Mount, ...] = ()
    if settings.mode is GrantMode.MPS:
        envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(sm)
        envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = _joined(
            [f"{i}={g.memory_mib}M" for i, g in enumerate(gpus)]
        )
        envs["CUDA_MPS_PIPE_DIRECTORY"] = settings.mps_pipe_dir
        mounts = (Mount(settings.mps_pipe_dir, settings.mps_pipe_dir),)
    elif settings.mode is GrantMode.HAMI:
        grant = _hami_grant(gpus, settings.hami, envs, cores_limit, owner)
        if isinstance(grant, Refusal):
            return grant
        return replace(grant, cdi_devices=settings.devices.cdi_devices(uuids))
    elif settings.mode is GrantMode.VGPU_CORE:
        if settings.core is None:
            return Refusal("mode vgpu-core without the library installed on the node (fail closed)")
        extra = settings.core.enforce(gpus, cores_limit, owner)
        if isinstance(extra, Refusal):
            return extra
        envs.update(extra.envs)
        mounts = extra.mounts
    return ContainerGrant(envs=envs, mounts=mounts, cdi_devices=settings.devices.cdi_devices(uuids))


def _hami_grant(
    gpus: Sequence[GpuLimit],
    hami: Preload | None,
    envs: dict[str, str],
    cores_limit: int | None,
    owner: DirOwner | None,
) -> ContainerGrant | Refusal:
    """Mode hami, as HAMi-core reads it: devices by **index** in `CUDA_VISIBLE_DEVICES` (it maps
    each entry with `atoi`, so UUIDs all became device 0 and later GPUs went unlimited), per-GPU
    memory and SM limits by that index, and a writable per-container cache (without one every
    CUDA process exits at its first call under a read-only root)."""
    envs["CUDA_VISIBLE_DEVICES"] = _joined(range(len(gpus)))
    for i, g in enumerate(gpus):
        envs[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = f"{g.memory_mib}m"
        envs[f"CUDA_DEVICE_SM_LIMIT_{i}"] = str(cores_limit or g.cores)
    envs["CUDA_DEVICE_SM_LIMIT"] = str(cores_limit or max(g.cores for g in gpus))
    if hami is None:
        return ContainerGrant(envs=envs)
    cache = hami.cache(owner)
    if isinstance(cache, Refusal):
        return cache
    envs.update(hami.envs())
    envs.update(cache.envs)
    return ContainerGrant(envs=envs, mounts=hami.mounts() + cache.mounts)
