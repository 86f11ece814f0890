"""The enforcement flags, shared by `vgpu node-agent` and `vgpu dra-driver`: the mode and what it
needs on the node (vgpu-core's library and state dir, the MPS pipe directory, HAMi-core).

`grant_settings` turns them into `GrantSettings` at start: it installs vgpu-core into the state
dir and checks a HAMi-core library's exports, so a node that would enforce nothing stops with one
line naming the flag (docs/isolation.md). The per-container directories live under the state dir;
each daemon says where (`dirs`), so the node agent and the DRA driver never collect each other's.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.core.errors import ConfigError
from vgpu.flags import add_path_flag
from vgpu.node.container_dirs import (
    DEFAULT_MAX_DIRS_PER_NAMESPACE,
    DEFAULT_MAX_DIRS_PER_POD,
    DirBounds,
)
from vgpu.node.device_list import DEFAULT_CDI_KIND, DeviceList, DeviceListStrategy

if TYPE_CHECKING:
    from vgpu.adapters.container_dirs import ContainerDirs
    from vgpu.node.grants import GrantSettings
    from vgpu.node.hami import HamiCore

log = logging.getLogger(__name__)
MODES = ("auto", "vgpu-core", "plain", "mps", "hami")


def add_mode_flags(p: argparse.ArgumentParser, *, default: str = "auto") -> None:
    """How a container's GPU share is enforced (vgpu-core, plain, MPS, HAMi-core)."""
    p.add_argument(
        "--mode",
        choices=MODES,
        default=default,
        help="how a container's GPU share is enforced; auto: vgpu-core when --vgpu-core-library "
        "exists (the image carries it), else plain; what each enforces: docs/isolation.md",
    )
    add_path_flag(
        p,
        "--vgpu-core-library",
        "/opt/vgpu/lib/libvgpu-core.so",
        "mode vgpu-core: the interposer in vgpu's image, installed into --state-dir",
        metavar="PATH",
    )
    add_path_flag(
        p,
        "--state-dir",
        "/var/lib/vgpu",
        "host directory, mounted at the same path: the installed library and the "
        "per-container limits (modes vgpu-core and hami)",
    )
    p.add_argument(
        "--max-container-dirs-per-pod",
        type=int,
        default=DEFAULT_MAX_DIRS_PER_POD,
        metavar="N",
        help="per-container directories (modes vgpu-core, hami) one pod may hold; beyond, its "
        "Allocate is refused (a pod's init containers with equal limits share one)",
    )
    p.add_argument(
        "--max-container-dirs-per-namespace",
        type=int,
        default=DEFAULT_MAX_DIRS_PER_NAMESPACE,
        metavar="N",
        help="per-container directories the pods of one namespace may hold on this node",
    )
    p.add_argument(
        "--container-dir-tmpfs",
        action="store_true",
        help="modes vgpu-core, hami: mount a small tmpfs of its own over each per-container "
        "directory when it is made (unmounted when freed), so one container cannot take "
        "another's room; needs mount rights in the host's mount namespace, and a container "
        "whose mount fails is refused (docs/isolation.md)",
    )
    p.add_argument("--mps-pipe-dir", default="/tmp/nvidia-mps", help="MPS pipe dir (--mode mps)")
    p.add_argument(
        "--device-list-strategy",
        choices=[s.value for s in DeviceListStrategy],
        default=DeviceListStrategy.CDI.value,
        help="how the container runtime learns a container's GPUs: cdi (CDI device names, "
        "needs containerd or CRI-O with CDI on and the GPUs' CDI spec) or envvar "
        "(NVIDIA_VISIBLE_DEVICES, only for runtimes without CDI: it does not hold against a "
        "tenant; docs/isolation.md, Runtime settings)",
    )
    p.add_argument(
        "--cdi-kind",
        default=DEFAULT_CDI_KIND,
        metavar="VENDOR/CLASS",
        help="the CDI kind whose spec names each GPU by its UUID (nvidia-ctk cdi generate: "
        "nvidia.com/gpu)",
    )
    p.add_argument(
        "--hami-core-library",
        metavar="PATH",
        help="mode hami: HAMi-core's libvgpu.so on the node, mounted and preloaded in containers "
        "(default: none, the mode then only passes limits; docs/isolation.md)",
    )
    p.add_argument(
        "--hami-preload-file",
        metavar="PATH",
        help="mode hami: a host file naming /usr/local/vgpu/libvgpu.so, mounted as "
        "/etc/ld.so.preload (default: none, LD_PRELOAD only)",
    )


def hami_core(args: argparse.Namespace, dirs: ContainerDirs | None = None) -> HamiCore | None:
    """HAMi-core's location from the flags (mode hami only); `grant_settings` checks the file.

    `dirs`: where the per-container caches go (default: the state dir's `containers/`)."""
    from vgpu.node.hami import HamiCore

    if args.hami_core_library is None:
        if args.hami_preload_file is not None:
            raise ConfigError(
                "--hami-preload-file needs --hami-core-library (the library it names)"
            )
        return None
    if args.mode != "hami":
        raise ConfigError(f"--hami-core-library is for --mode hami, not --mode {args.mode}")
    return HamiCore(args.hami_core_library, args.hami_preload_file, dirs or container_dirs(args))


def grant_settings(args: argparse.Namespace, dirs: ContainerDirs | None = None) -> GrantSettings:
    """The mode and what it needs on the node (vgpu-core is installed here, at start)."""
    from vgpu.adapters.dir_mounts import page_size
    from vgpu.adapters.shared_files import report_bound
    from vgpu.adapters.vgpu_core_install import checked_library, choose_mode, install_vgpu_core
    from vgpu.node.grants import GrantMode, GrantSettings
    from vgpu.node.shared_bound import dir_tmpfs

    dirs = dirs or container_dirs(args)
    mode, why = choose_mode(args.mode, args.vgpu_core_library)
    hami = hami_core(args, dirs)
    if hami is not None:  # a build without the CUDA exports would enforce nothing
        checked_library("--hami-core-library", Path(hami.library))
    core = None
    if mode is GrantMode.VGPU_CORE:
        core = install_vgpu_core(args.vgpu_core_library, args.state_dir, dirs)
    if mode in (GrantMode.VGPU_CORE, GrantMode.HAMI):  # the modes whose containers write there
        each = dir_tmpfs(mode, page_size()) if args.container_dir_tmpfs else None
        if each is not None:
            dirs.mount_each(each)  # a failed mount refuses the container, so it stays on
            problem = dirs.check_mount()
            if problem is not None:
                log.error("%s", problem)
                each = None  # no bound per container is claimed while mounts fail
        report_bound(dirs.root, each)
    return GrantSettings(mode, args.mps_pipe_dir, hami, core, device_list(args), why)


def container_dirs(args: argparse.Namespace) -> ContainerDirs:
    """The state dir's per-container directories, with the bounds the flags set."""
    from vgpu.adapters.container_dirs import ContainerDirs

    return ContainerDirs(args.state_dir, bounds=dir_bounds(args))


def dir_bounds(args: argparse.Namespace) -> DirBounds:
    """The per-pod and per-namespace bounds on container directories (the node agent's and,
    for its claims' directories, the DRA driver's)."""
    per_pod, per_ns = args.max_container_dirs_per_pod, args.max_container_dirs_per_namespace
    if not 1 <= per_pod <= per_ns:
        raise ConfigError(
            f"--max-container-dirs-per-pod={per_pod} must be at least 1 and at most "
            f"--max-container-dirs-per-namespace={per_ns}"
        )
    return DirBounds(namespace=per_ns, pod=per_pod)


def device_list(args: argparse.Namespace) -> DeviceList:
    """How containers' GPUs are named to the runtime; the variable is logged as unprotected."""
    try:
        devices = DeviceList(DeviceListStrategy(args.device_list_strategy), args.cdi_kind)
    except ValueError as e:
        raise ConfigError(f"--cdi-kind: {e}") from None
    if devices.strategy is DeviceListStrategy.ENVVAR:
        log.warning(
            "--device-list-strategy envvar: containers' GPUs are named in NVIDIA_VISIBLE_DEVICES, "
            "which a pod or its image can set to every GPU of the node; use cdi where the "
            "runtime supports it (docs/isolation.md, Runtime settings)"
        )
    return devices
