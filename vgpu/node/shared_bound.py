"""How much a container may keep in its shared files, which it can write: the rule, no I/O.

The libraries keep their accounting in files the container's processes write (vgpu-core's
`state` and `activity`, mounted one by one; HAMi-core's cache, in a directory mounted whole).
They sit under the agent's state dir on the host, often a tmpfs under `/run` (the node's memory),
outside the kubelet's ephemeral-storage accounting, and they outlive the container until the
agent collects its directory. A tenant could grow them without bound (one write of a few GiB,
or many files in HAMi-core's directory). So each collect step measures every shared directory
against this rule and cuts it back (`vgpu.adapters.container_dirs.ContainerDirs.trim_shared`):

* a library's own file larger than its layout is cut to that size (the library maps exactly
  its layout, vgpu-core/src/shared_file.c, so nothing a process maps is lost);
* an entry that is not a regular file is removed (the libraries make regular files only, and
  open them without following a link);
* when the directory still holds more than `MAX_SHARED_ENTRIES` entries or `MAX_SHARED_BYTES`,
  every entry no library makes is removed.

The container that grew the files is the one that loses what it wrote there; no other container
shares the directory (a pod's init containers share one only among themselves).

That cut is periodic: between two collect steps a burst is possible. The bound is hard only
where the container directories sit on a filesystem of their own whose size is the bound (a
`tmpfs` mounted with `size=`, e.g. by the chart's `containerDirs.size` init container): then a
write past it fails with ENOSPC in the writing container. `bound_report` says, in the one line
a daemon logs at start, which of the two holds (`vgpu.adapters.shared_files.mount_facts`).

A node-wide tmpfs bounds the node, not one tenant against another: one container that fills it
leaves the others no room. With a tmpfs of its own per container directory (`DirTmpfs`, mounted
by `vgpu.adapters.container_dirs.ContainerDirs` when it makes the directory, unmounted when it
frees it), a container's writes fail with ENOSPC in its own directory only, and another's room
is whole: `dir_tmpfs` sizes it from the files the directory holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from vgpu.node.grants import GrantMode
from vgpu.node.hami import CACHE_FILE
from vgpu.node.limits_file import ACTIVITY_BYTES, ACTIVITY_NAME, MAX_LIMITS_BYTES, STATE_NAME

STATE_BYTES = 152_864
"""`sizeof(vgpu_region)` (vgpu-core/src/region.h: 16 device slots, 1,024 process slots, 64 shared
VMM allocations); pinned against the compiled header by
tests/isolation/test_forged_shared_state.py."""
HAMI_CACHE_NAME = PurePosixPath(CACHE_FILE).name
HAMI_CACHE_LAYOUT_BYTES = 2_008_953
"""HAMi-core's cache file as HAMi-core makes it: `try_create_shrreg`
(src/multiprocess/multiprocess_memory_limit.c) seeks to `SHARED_REGION_SIZE_MAGIC`, which is
`sizeof(shared_region_t)` (src/multiprocess/multiprocess_memory_limit.h), writes one byte there
and maps that many bytes. The struct holds 1,024 process slots for 16 GPUs: 2,008,952 bytes on
x86-64 with glibc (compiled from the header), unchanged from its 2024-08-27 version (9b46404)
to the newest read (8f3a89c, 2026-06-30); the versions before were smaller (1,197,896 bytes
from 2024-04-18, 804,680 at first). Not a documented size: read from the source."""
MAX_HAMI_CACHE_BYTES = 4 << 20
"""The cut of HAMi-core's cache file: about twice its layout (`HAMI_CACHE_LAYOUT_BYTES`), so a
later version with a larger table is not cut below what its processes map (a mapping past the
end of its file faults), while a tenant's growth stays bounded."""
MAX_SHARED_ENTRIES = 64
MAX_SHARED_BYTES = 32 << 20
MAX_OWNER_BYTES = 512
"""An `owner` file is one short line (`vgpu.node.container_dirs.DirOwner.render`)."""
DIR_INODES = 6
"""The inodes a container directory holds besides its shared files: itself, `limits/`, `limits`
and its temporary copy while it is replaced, `shared/`, `owner`."""

VGPU_CORE_FILES: Mapping[str, int] = {STATE_NAME: STATE_BYTES, ACTIVITY_NAME: ACTIVITY_BYTES}
HAMI_FILES: Mapping[str, int] = {HAMI_CACHE_NAME: MAX_HAMI_CACHE_BYTES}


@dataclass(frozen=True, slots=True)
class SharedEntry:
    """One entry of a shared directory, as `lstat` shows it (a link is not followed)."""

    name: str
    regular: bool
    size: int


@dataclass(frozen=True, slots=True)
class Trim:
    """What to cut: files to truncate (name, size) and entries to remove; `problem` says why."""

    truncate: tuple[tuple[str, int], ...] = ()
    remove: tuple[str, ...] = ()
    problem: str | None = None


def trim(entries: Sequence[SharedEntry], files: Mapping[str, int]) -> Trim:
    """What to cut from a shared directory holding `entries`, whose libraries' files and their
    sizes are `files` (module doc)."""
    cut = tuple(
        (e.name, files[e.name])
        for e in entries
        if e.name in files and e.regular and e.size > files[e.name]
    )
    ours = {e.name for e in entries if e.name in files and e.regular}
    kept = sum(min(e.size, files.get(e.name, e.size)) for e in entries if e.regular)
    over = len(entries) > MAX_SHARED_ENTRIES or kept > MAX_SHARED_BYTES
    remove = tuple(e.name for e in entries if e.name not in ours and (over or not e.regular))
    reasons = [f"{name} larger than {size} bytes" for name, size in cut]
    if over:
        reasons.append(
            f"{len(entries)} entries and {kept} bytes (the bound is {MAX_SHARED_ENTRIES} entries "
            f"and {MAX_SHARED_BYTES} bytes)"
        )
    elif remove:
        reasons.append(f"{len(remove)} entries that are not regular files")
    return Trim(cut, remove, "; ".join(reasons) or None)


@dataclass(frozen=True, slots=True)
class MountFacts:
    """The container directories' filesystem: whether it is mounted at exactly their root (a
    filesystem of their own), its type and its size (`statvfs`: blocks times fragment size)."""

    root: str
    own: bool
    fstype: str = ""
    size: int = 0
    problem: str | None = None  # the root could not be examined (then no bound is claimed)


@dataclass(frozen=True, slots=True)
class DirTmpfs:
    """The tmpfs of one container directory: its size in bytes and its number of inodes."""

    size: int
    inodes: int

    def options(self) -> str:
        """tmpfs's mount options (mode: the directory as the agent makes it)."""
        return f"size={self.size},nr_inodes={self.inodes},mode=0755"


def dir_tmpfs(mode: GrantMode, page: int) -> DirTmpfs:
    """A container directory's own tmpfs in `mode`: room for the library's files at their
    layout, `limits` twice (`write_limits` replaces it through a temporary copy) and `owner`,
    each rounded up to whole pages (tmpfs counts pages), and the inodes of those files only.
    Exactly what the libraries map fits, so a process never faults on its own files; anything
    more a tenant writes fails with ENOSPC in its own directory."""
    files = shared_files(mode)
    size = sum(_pages(n, page) for n in files.values())
    size += 2 * _pages(MAX_LIMITS_BYTES, page) + _pages(MAX_OWNER_BYTES, page)
    return DirTmpfs(size, DIR_INODES + len(files))


def _pages(n: int, page: int) -> int:
    return -(-n // page) * page


def bound_report(facts: MountFacts, each: DirTmpfs | None = None) -> tuple[bool, str]:
    """Whether the shared files' bound is hard, and the line saying so and why; `each`: the
    tmpfs every new container directory gets, if any."""
    where = f"container directories under {facts.root}"
    if each is not None:
        return True, (
            f"{where}: hard size bound per container: each new directory a tmpfs of its own of "
            f"{each.size} bytes and {each.inodes} inodes (--container-dir-tmpfs); a directory "
            "made before keeps the node's bound; the shared files are also cut back every "
            "collect step"
        )
    if facts.own and facts.size > 0 and facts.problem is None:
        return True, (
            f"{where}: hard size bound: a {facts.fstype or 'filesystem'} of their own of "
            f"{facts.size} bytes (statvfs); the shared files are also cut back every collect step"
        )
    why = facts.problem or "not a filesystem of their own"
    return False, (
        f"{where}: periodic bound only (shared files cut back every collect step; a burst in "
        f"between is possible): {why}; for a hard bound mount a size-limited tmpfs there "
        "(chart nodeAgent.containerDirs.size, docs/isolation.md)"
    )


def shared_files(mode: GrantMode) -> Mapping[str, int]:
    """The library files a mode's shared directories hold, and their sizes."""
    return HAMI_FILES if mode is GrantMode.HAMI else VGPU_CORE_FILES
