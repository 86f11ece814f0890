"""Putting an interposer on the node at the start of the node agent or the DRA driver, and
choosing the mode by it: file work both daemons do alike (`vgpu.daemons.flags.mode`), so an
adapter's, and neither daemon reaches into the other's package for it.

vgpu-core reaches the node in the agent's image: the Dockerfile builds it with
`hack/build-interposer.sh` into `DEFAULT_LIBRARY`. At start the agent checks it exports the CUDA
calls it hooks (`vgpu.node.elf_symbols`) and copies it into `<state dir>/lib/` on the host, with
the preload file naming its path inside containers, as HAMi's device plugin installs its library.
The state dir is a hostPath mounted at the same path in the agent's pod, so the paths the agent
writes are the host paths the runtime mounts. Replacing is atomic (write, then `rename`): a
running container keeps the inode it has mounted, a new one gets the new library.

The DRA driver installs its CDI hook program the same way (`install_cdi_hook`), into
`<state dir>/bin/`, when the node's memory backend is the driver's.

`--mode auto` (the default) is `vgpu-core` when the image carries the library and `plain`
otherwise; the choice is logged. A library that is missing or lacks the hooks stops the agent
at start with one line naming the path and the fix: an enforcing node must not admit pods
unenforced, and a crash-looping agent is what an operator sees.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.core.errors import ConfigError
from vgpu.node.elf_symbols import ElfError, missing_hooks
from vgpu.node.grants import GrantMode
from vgpu.node.vgpucore import LIBRARY_IN_CONTAINER, VgpuCore

log = logging.getLogger(__name__)
DEFAULT_LIBRARY = Path("/opt/vgpu/lib/libvgpu-core.so")
DEFAULT_STATE_DIR = Path("/var/lib/vgpu")
LIBRARY_NAME = "libvgpu-core.so"
PRELOAD_NAME = "ld.so.preload"


def choose_mode(mode: str, library: Path) -> tuple[GrantMode, str]:
    """The mode `--mode` names, and how it was chosen ("" when named); `auto`: vgpu-core when
    the library is there, else plain. The reason goes into the node's one start-up line
    (`vgpu.node.driver_mode.Choice.line`), beside the memory backend's."""
    if mode != "auto":
        return GrantMode(mode), ""
    if library.is_file():
        return GrantMode.VGPU_CORE, f"--mode auto: {library} is installed"
    return GrantMode.PLAIN, f"--mode auto: {library} is not in this image, so plain"


def checked_library(flag: str, path: Path) -> bytes:
    """The library's bytes, once it is known to export the CUDA hooks; else ConfigError."""
    try:
        data = path.read_bytes()
        missing = missing_hooks(data)
    except OSError as e:
        raise ConfigError(f"{flag}: cannot read {path}: {e.strerror or e}") from None
    except ElfError as e:
        raise ConfigError(
            f"{flag}: {path} is not a shared library the agent can read: {e}"
        ) from None
    if missing:
        raise ConfigError(
            f"{flag}: {path} does not export {', '.join(missing)}, so it would enforce nothing "
            "(a Release build of HAMi-core exports only dlsym); install a build that exports "
            "the CUDA driver calls"
        )
    return data


def install_vgpu_core(library: Path, state_dir: Path, dirs: ContainerDirs) -> VgpuCore:
    """Copy the checked library and a preload file into `<state_dir>/lib/`; the enforcer."""
    data = checked_library("--vgpu-core-library", library)
    target = state_dir / "lib"
    try:
        target.mkdir(parents=True, exist_ok=True)
        _replace(target / LIBRARY_NAME, data, 0o755)
        _replace(target / PRELOAD_NAME, f"{LIBRARY_IN_CONTAINER}\n".encode(), 0o644)
        dirs.root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"--state-dir: cannot install vgpu-core under {target}: {e.strerror or e}; mount a "
            "writable host directory there (chart: nodeAgent.stateDir)"
        ) from None
    log.info("vgpu-core installed at %s (%d bytes)", target / LIBRARY_NAME, len(data))
    return VgpuCore(str(target / LIBRARY_NAME), str(target / PRELOAD_NAME), dirs)


def install_cdi_hook(program: Path, state_dir: Path) -> Path:
    """Copy the DRA driver's CDI hook program (`vgpu-core/hook/`, in the image beside vgpu-core)
    into `<state_dir>/bin/`, where the container runtime runs it; its host path, or
    ConfigError naming the flag and the fix (the driver must not run its memory limits with
    containers that need not wait for them)."""
    try:
        data = program.read_bytes()
    except OSError as e:
        raise ConfigError(
            f"--cdi-hook-program: cannot read {program}: {e.strerror or e}; the image carries "
            "it (hack/build-interposer.sh)"
        ) from None
    target = state_dir / "bin" / program.name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _replace(target, data, 0o755)
    except OSError as e:
        raise ConfigError(
            f"--state-dir: cannot install the CDI hook at {target}: {e.strerror or e}; mount a "
            "writable host directory there"
        ) from None
    log.info("CDI hook installed at %s (%d bytes)", target, len(data))
    return target


def _replace(path: Path, data: bytes, mode: int) -> None:
    """Write `path` atomically unless it already holds `data`."""
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.chmod(mode)
    os.replace(tmp, path)
