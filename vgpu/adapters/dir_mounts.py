"""A tmpfs of its own over one container directory: mounted when the directory is made and
unmounted when it is freed (`vgpu.adapters.container_dirs.ContainerDirs`).

The calls are mount(2) and umount2(2) through the C library, not the `mount` program, so the
daemon needs no tool in its image and gets the error number itself. The daemon needs mount
rights in the host's mount namespace for the runtime to see the tmpfs (`CAP_SYS_ADMIN` and a
state directory mounted with `Bidirectional` propagation: the chart's
`nodeAgent.containerDirs.perContainerTmpfs`); without them the mount fails and the caller
refuses the container.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

from vgpu.node.shared_bound import DirTmpfs

_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8  # <sys/mount.h>
_MNT_DETACH, _UMOUNT_NOFOLLOW = 2, 8
_SOURCE = b"vgpu-container-dir"


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _raise_errno(path: Path) -> None:
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err), str(path))


def mount_tmpfs(path: Path, tmpfs: DirTmpfs) -> None:
    """Mount a tmpfs of `tmpfs`'s size and inodes over the directory `path` (no set-user-ID,
    device or executable files: the directory holds data files only). Raises OSError."""
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    options = tmpfs.options().encode()
    if _libc().mount(_SOURCE, os.fsencode(path), b"tmpfs", ctypes.c_ulong(flags), options) != 0:
        _raise_errno(path)


def unmount(path: Path) -> None:
    """Detach the mount at `path` (lazily: a process still holding a file keeps its pages until
    it lets go; new opens see the directory below). Never follows a link. Raises OSError."""
    if _libc().umount2(os.fsencode(path), _MNT_DETACH | _UMOUNT_NOFOLLOW) != 0:
        _raise_errno(path)


def page_size() -> int:
    """The page size tmpfs counts in."""
    return os.sysconf("SC_PAGE_SIZE")
