"""Making HAMi-core's library load in a `hami`-mode container, as HAMi's own device plugin does.

The `hami` mode's limit variables (`CUDA_DEVICE_MEMORY_LIMIT_<i>`, `CUDA_DEVICE_SM_LIMIT`) do
nothing unless HAMi-core's `libvgpu.so` is loaded in the container's processes; vgpu does not ship
it. When the operator installs it on the node, the agent mounts it into every vGPU container at
`LIBRARY_IN_CONTAINER` (read-only) and preloads it:

* always `LD_PRELOAD=LIBRARY_IN_CONTAINER`, which the dynamic loader honours for every
  dynamically linked process that inherits the environment;
* with a preload file (a host file whose one line is `LIBRARY_IN_CONTAINER`, like HAMi's
  `ld.so.preload`), also that file mounted read-only at `/etc/ld.so.preload`, which still applies
  when a program clears its environment. It replaces the image's own /etc/ld.so.preload.

HAMi-core keeps its accounting in a shared cache file (`CUDA_DEVICE_MEMORY_SHARED_CACHE`, by
default under `/tmp`); without a writable one every CUDA process exits at its first call, so a pod
with a read-only root and no writable `/tmp` could not use CUDA at all. With a state dir the agent
gives each container its own directory, mounted writable at `CACHE_DIR_IN_CONTAINER`, and points
the variable there. The library itself is checked at the agent's start
(`vgpu.adapters.vgpu_core_install.checked_library`): a build that does not export the CUDA calls is
refused.

Statically linked programs and setuid binaries ignore both. Paths are checked for form only; the
kubelet's runtime fails the container start, naming the path, when a host file is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from vgpu.core.errors import ConfigError
from vgpu.node.container_dirs import ContainerDirMaker, DirectoryLimit, DirOwner
from vgpu.node.grants import ContainerGrant, Mount, Refusal

LIBRARY_IN_CONTAINER = "/usr/local/vgpu/libvgpu.so"
PRELOAD_IN_CONTAINER = "/etc/ld.so.preload"
CACHE_DIR_IN_CONTAINER = "/run/vgpu-shared"
CACHE_FILE = f"{CACHE_DIR_IN_CONTAINER}/hami.cache"


@dataclass(frozen=True, slots=True)
class HamiCore:
    """Where HAMi-core lives on the node (host paths)."""

    library: str
    preload_file: str | None = None
    dirs: ContainerDirMaker | None = None  # per-container cache directories (the agent's state dir)

    def __post_init__(self) -> None:
        _absolute("--hami-core-library", self.library, "/usr/local/vgpu/libvgpu.so")
        if not PurePosixPath(self.library).name.startswith("lib") or ".so" not in self.library:
            raise ConfigError(
                f"--hami-core-library: {self.library!r} is not a shared library; give the path "
                "of HAMi-core's libvgpu.so on the node"
            )
        if self.preload_file is not None:
            _absolute("--hami-preload-file", self.preload_file, "/usr/local/vgpu/ld.so.preload")

    def envs(self) -> dict[str, str]:
        """Variables added to a hami-mode grant."""
        return {"LD_PRELOAD": LIBRARY_IN_CONTAINER}

    def cache(self, owner: DirOwner | None = None) -> ContainerGrant | Refusal:
        """A writable cache directory of the container's own, and the variable naming it;
        `owner`: whose container, for the per-pod and per-namespace bounds."""
        if self.dirs is None:
            return ContainerGrant()
        try:
            cid = self.dirs.create(None, owner)
        except DirectoryLimit as e:
            return Refusal(f"hami: {e}; the container is not admitted without its cache")
        return ContainerGrant(
            envs={"CUDA_DEVICE_MEMORY_SHARED_CACHE": CACHE_FILE},
            mounts=(Mount(CACHE_DIR_IN_CONTAINER, str(self.dirs.shared_dir(cid))),),
        )

    def mounts(self) -> tuple[Mount, ...]:
        """Mounts added to a hami-mode grant."""
        library = Mount(LIBRARY_IN_CONTAINER, self.library, read_only=True)
        if self.preload_file is None:
            return (library,)
        return (library, Mount(PRELOAD_IN_CONTAINER, self.preload_file, read_only=True))


def _absolute(flag: str, path: str, example: str) -> None:
    if not PurePosixPath(path).is_absolute():
        raise ConfigError(f"{flag}: {path!r} must be an absolute path on the node, e.g. {example}")
