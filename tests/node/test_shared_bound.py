"""A container's shared files are bounded: it can write them, and they sit on the node (often a
tmpfs: memory) outside the kubelet's ephemeral-storage accounting, until the agent collects
their directory. The agent's collect step cuts them back (`vgpu.node.shared_bound`), and what the
agent reads from a container directory is read with a bound and never blocks."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.adapters.container_dirs import ContainerDirs, read_limits
from vgpu.agent.elastic import ElasticDuty
from vgpu.node.grants import GrantMode
from vgpu.node.limits_file import (
    ACTIVITY_BYTES,
    LIMITS_NAME,
    MAX_LIMITS_BYTES,
    STATE_NAME,
    DeviceLimit,
    LimitsError,
)
from vgpu.node.shared_bound import (
    HAMI_CACHE_LAYOUT_BYTES,
    HAMI_CACHE_NAME,
    HAMI_FILES,
    MAX_HAMI_CACHE_BYTES,
    MAX_SHARED_BYTES,
    MAX_SHARED_ENTRIES,
    STATE_BYTES,
    VGPU_CORE_FILES,
    DirTmpfs,
    MountFacts,
    SharedEntry,
    Trim,
    bound_report,
    dir_tmpfs,
    trim,
)

G0 = f"GPU-{uuid.UUID(int=1)}"
GIB = 1 << 30
MIB = 1 << 20


def _collect(dirs: ContainerDirs, tmp_path: Path, **kw: object) -> None:
    """One collect step of the agent's duty (it runs every `collect_s`)."""
    ElasticDuty(dirs, tmp_path / "checkpoint", allowances=False, **kw).step()  # type: ignore[arg-type]


def test_a_state_file_grown_past_its_layout_is_cut_back_and_keeps_its_region(
    tmp_path: Path,
) -> None:
    dirs = ContainerDirs(tmp_path)
    cid = dirs.create([DeviceLimit(G0, GIB, 30, 30, 30)])
    state = dirs.shared_dir(cid) / STATE_NAME
    region = bytes(range(256)) * (STATE_BYTES // 256) + b"\1" * (STATE_BYTES % 256)
    with state.open("wb") as f:
        f.write(region)
        f.write(b"\0" * (64 * MIB))  # the container writes far past the library's layout
    _collect(dirs, tmp_path)
    assert state.stat().st_size == STATE_BYTES
    assert state.read_bytes() == region, "the library's region is left as it was"


def test_hami_files_past_the_bound_are_removed_and_the_cache_is_kept(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    cid = dirs.create(None)
    shared = dirs.shared_dir(cid)
    (shared / HAMI_CACHE_NAME).write_bytes(b"c" * 4096)
    for n in range(MAX_SHARED_ENTRIES + 10):  # the directory is mounted whole, writable
        (shared / f"junk{n}").write_bytes(b"x")
    (shared / "deep").mkdir()
    (shared / "deep" / "more").write_bytes(b"y" * 10)
    (shared / "link").symlink_to(tmp_path)  # never followed
    _collect(dirs, tmp_path, shared_files=HAMI_FILES)
    assert sorted(os.listdir(shared)) == [HAMI_CACHE_NAME]
    assert (shared / HAMI_CACHE_NAME).read_bytes() == b"c" * 4096
    assert tmp_path.is_dir() and (tmp_path / "containers" / cid).is_dir(), "link not followed"


def test_a_directory_within_its_bounds_is_left_alone(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    cid = dirs.create(None)
    shared = dirs.shared_dir(cid)
    (shared / HAMI_CACHE_NAME).write_bytes(b"c" * 4096)
    (shared / "hami.lock").write_bytes(b"")  # a file the library may keep beside its cache
    before = sorted(os.listdir(shared))
    _collect(dirs, tmp_path, shared_files=HAMI_FILES)
    assert sorted(os.listdir(shared)) == before


def test_a_fifo_in_place_of_limits_is_an_error_and_never_blocks(tmp_path: Path) -> None:
    """A read of `limits` is bounded and never waits on a FIFO (the file read whole before)."""
    dirs = ContainerDirs(tmp_path)
    cid = dirs.create([DeviceLimit(G0, GIB, 30, 30, 30)])
    limits = dirs.limits_dir(cid) / LIMITS_NAME
    limits.unlink()
    os.mkfifo(limits)
    got: list[BaseException] = []

    def read() -> None:
        try:
            read_limits(dirs.limits_dir(cid))
        except BaseException as e:
            got.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # unblock it before failing
        os.close(os.open(limits, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading limits blocked on a FIFO")
    assert len(got) == 1 and isinstance(got[0], LimitsError), got
    assert "not a regular file" in str(got[0])


def test_an_oversized_limits_file_is_named_not_read_whole(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    cid = dirs.create([DeviceLimit(G0, GIB, 30, 30, 30)])
    with (dirs.limits_dir(cid) / LIMITS_NAME).open("r+b") as f:
        f.truncate(8 * GIB)  # sparse: reading it whole would take 8 GiB of memory
    with pytest.raises(LimitsError, match="larger than 4096 bytes"):
        read_limits(dirs.limits_dir(cid))


_names = st.sampled_from([STATE_NAME, "activity", "a", "b", "c"]) | st.text("xyz", min_size=1)
_entries = st.lists(
    st.builds(SharedEntry, _names, st.booleans(), st.integers(0, 64 * MIB)),
    max_size=MAX_SHARED_ENTRIES + 20,
    unique_by=lambda e: e.name,
)


@given(_entries)
def test_after_a_trim_every_directory_is_within_its_bounds(entries: list[SharedEntry]) -> None:
    cut = trim(entries, VGPU_CORE_FILES)
    sizes = dict(cut.truncate)
    left = [
        SharedEntry(e.name, e.regular, sizes.get(e.name, e.size))
        for e in entries
        if e.name not in cut.remove
    ]
    assert len(left) <= MAX_SHARED_ENTRIES
    assert sum(e.size for e in left if e.regular) <= MAX_SHARED_BYTES
    assert all(e.regular for e in left)
    assert all(e.size <= VGPU_CORE_FILES[e.name] for e in left if e.name in VGPU_CORE_FILES)
    ours = {e.name for e in entries if e.regular and e.name in VGPU_CORE_FILES}
    assert not set(cut.remove) & ours, "a library's own file is never removed"
    assert (cut.problem is None) == (not cut.truncate and not cut.remove)


def test_the_activity_bound_is_the_librarys_file() -> None:
    assert VGPU_CORE_FILES["activity"] == ACTIVITY_BYTES


def test_a_cut_that_fails_is_said_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = ContainerDirs(tmp_path)
    cid = dirs.create([DeviceLimit(G0, GIB, 30, 30, 30)])
    with (dirs.shared_dir(cid) / STATE_NAME).open("wb") as f:
        f.truncate(STATE_BYTES + MIB)

    def refused(fd: int, size: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "ftruncate", refused)
    (line,) = dirs.trim_shared(VGPU_CORE_FILES)
    assert f"{STATE_NAME} larger than {STATE_BYTES} bytes" in line
    assert f"NOT cut back: {STATE_NAME}: Operation not permitted" in line


def test_the_bound_is_hard_only_on_a_sized_filesystem_of_the_directories_own() -> None:
    hard, line = bound_report(MountFacts("/var/lib/vgpu/containers", True, "tmpfs", 64 << 20))
    assert hard and "hard size bound: a tmpfs of their own of 67108864 bytes" in line
    for facts in (
        MountFacts("/var/lib/vgpu/containers", False, "ext4", 1 << 40),
        MountFacts("/var/lib/vgpu/containers", True, "tmpfs", 0),
        MountFacts("/var/lib/vgpu/containers", True, "tmpfs", 1 << 20, "cannot statvfs"),
    ):
        hard, line = bound_report(facts)
        assert not hard and line.startswith("container directories under /var/lib/vgpu/containers")
        assert "periodic bound only" in line and "nodeAgent.containerDirs.size" in line


def test_hami_cores_own_cache_file_is_never_cut_and_a_grown_one_is_cut_above_it() -> None:
    """Cutting the cache below what HAMi-core maps would fault its processes; the bound keeps
    room above the size its source makes (`HAMI_CACHE_LAYOUT_BYTES`)."""
    own = SharedEntry(HAMI_CACHE_NAME, True, HAMI_CACHE_LAYOUT_BYTES)
    assert trim([own], HAMI_FILES) == Trim()
    grown = SharedEntry(HAMI_CACHE_NAME, True, 8 * HAMI_CACHE_LAYOUT_BYTES)
    ((name, size),) = trim([grown], HAMI_FILES).truncate
    assert name == HAMI_CACHE_NAME and HAMI_CACHE_LAYOUT_BYTES < size == MAX_HAMI_CACHE_BYTES


@given(
    st.sampled_from([4096, 16384, 65536]), st.sampled_from([GrantMode.VGPU_CORE, GrantMode.HAMI])
)
def test_a_directorys_own_tmpfs_holds_its_files_at_their_layout_and_little_more(
    page: int, mode: GrantMode
) -> None:
    """What the libraries map must fit (a mapped page past the size faults), and the size must
    stay small: the files, `limits` twice (replaced through a copy), `owner`, page-rounded."""
    each = dir_tmpfs(mode, page)
    files = HAMI_FILES if mode is GrantMode.HAMI else VGPU_CORE_FILES
    assert each.size % page == 0 and each.size >= sum(files.values()) + 2 * MAX_LIMITS_BYTES
    assert each.size <= sum(files.values()) + (len(files) + 3) * page
    assert each.inodes == 6 + len(files)
    assert each.options() == f"size={each.size},nr_inodes={each.inodes},mode=0755"


def test_the_vgpu_core_directorys_tmpfs_on_4k_pages() -> None:
    assert dir_tmpfs(GrantMode.VGPU_CORE, 4096) == DirTmpfs(155_648 + 4096 + 3 * 4096, 8)
    assert dir_tmpfs(GrantMode.HAMI, 4096) == DirTmpfs((4 << 20) + 3 * 4096, 7)


def test_a_tmpfs_per_directory_is_reported_as_a_hard_bound_per_container() -> None:
    facts = MountFacts("/var/lib/vgpu/containers", False, "ext4", 1 << 40)
    hard, line = bound_report(facts, DirTmpfs(172_032, 8))
    assert hard and "hard size bound per container" in line
    assert "a tmpfs of its own of 172032 bytes and 8 inodes" in line
