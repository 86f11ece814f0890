"""The `vgpu-core` mode's part of an Allocate answer: vgpu's own interposer, loaded and limited.

For every container it admits the agent creates a per-container directory (`ContainerDirs`),
writes its `limits` there (`vgpu.node.limits_file`) and answers with the four mounts of the
contract (vgpu-core/README.md): the library read-only at `LIBRARY_IN_CONTAINER`, the preload file
read-only at `/etc/ld.so.preload` (so a process started with `env -i` loads it too), the limits
directory read-only at `/run/vgpu/` and the shared directory's two files, `state` and `activity`,
each read-write at `/run/vgpu-shared/<name>`. The files, not the directory, are mounted: the
agent creates them, so a container cannot add entries to the host directory (it was a
world-writable host directory outside the kubelet's ephemeral-storage accounting); a file it
creates next to them lands in its own writable layer, which the kubelet accounts.
`LD_PRELOAD` names the library as well, for images whose own loader setup ignores the preload
file. The library reads its limits only from the mounted file, so nothing in the pod's
environment can raise or remove them; the shipped admission policy refuses pod specs that set
`LD_PRELOAD` or mount over these paths (docs/isolation.md).

The library and the preload file are host paths: the agent installs them at start from its image
(`vgpu.adapters.vgpu_core_install`). A failure to prepare the directory refuses the Allocate: an
enforcing node never admits a container unenforced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.node.container_dirs import ContainerDirMaker, DirectoryLimit, DirOwner
from vgpu.node.grants import MIB, ContainerGrant, GpuLimit, Mount, Refusal
from vgpu.node.limits_file import SHARED_FILES, DeviceLimit, LimitsError, render_limits

LIBRARY_IN_CONTAINER = "/usr/local/vgpu/libvgpu-core.so"
PRELOAD_IN_CONTAINER = "/etc/ld.so.preload"
LIMITS_IN_CONTAINER = "/run/vgpu"
SHARED_IN_CONTAINER = "/run/vgpu-shared"
STATE_IN_CONTAINER, ACTIVITY_IN_CONTAINER = (f"{SHARED_IN_CONTAINER}/{n}" for n in SHARED_FILES)
ENFORCEMENT_PATHS = (
    LIBRARY_IN_CONTAINER,
    PRELOAD_IN_CONTAINER,
    LIMITS_IN_CONTAINER,
    SHARED_IN_CONTAINER,
)


@dataclass(frozen=True, slots=True)
class VgpuCore:
    """The library and preload file installed on the node, and the container directories."""

    library: str
    preload_file: str
    dirs: ContainerDirMaker

    def enforce(
        self, gpus: Sequence[GpuLimit], cores_limit: int | None, owner: DirOwner | None = None
    ) -> ContainerGrant | Refusal:
        """Prepare the container's directory with its limits; the variables and mounts."""
        devices = device_limits(gpus, cores_limit)
        if isinstance(devices, Refusal):
            return devices
        try:
            cid = self.dirs.create(devices, owner)
        except DirectoryLimit as e:
            return Refusal(f"vgpu-core: {e}; the container is not admitted unenforced")
        return ContainerGrant(
            envs={"LD_PRELOAD": LIBRARY_IN_CONTAINER},
            mounts=(
                Mount(LIBRARY_IN_CONTAINER, self.library, read_only=True),
                Mount(PRELOAD_IN_CONTAINER, self.preload_file, read_only=True),
                Mount(LIMITS_IN_CONTAINER, str(self.dirs.limits_dir(cid)), read_only=True),
                *(
                    Mount(f"{SHARED_IN_CONTAINER}/{name}", str(self.dirs.shared_dir(cid) / name))
                    for name in SHARED_FILES
                ),
            ),
        )


def device_limits(gpus: Sequence[GpuLimit], cores_limit: int | None) -> list[DeviceLimit] | Refusal:
    """The limits file's device lines: the allowance starts at the guarantee (the elastic duty
    raises it while the GPU has idle capacity)."""
    devices = [
        DeviceLimit(g.uuid, g.memory_mib * MIB, g.cores, max(g.cores, cores_limit or 0), g.cores)
        for g in gpus
    ]
    try:
        render_limits(devices)  # every bound of the contract, checked before anything is written
    except LimitsError as e:
        return Refusal(f"vgpu-core: {e}")
    return devices
