"""The host-process ports: cgroup files read from a procfs root, and a killer that refuses to
signal init or the agent itself (no real process is signalled here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vgpu.adapters.procfs import ProcCgroupReader, SignalKiller
from vgpu.node.cgroup import CgroupOwner, parse_cgroup

UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CID = "ab" * 32


def test_reads_a_processes_cgroup_below_the_proc_root(tmp_path: Path) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(f"0::/kubepods/besteffort/pod{UID}/{CID}\n")
    reader = ProcCgroupReader(tmp_path)
    text = reader.read(4242)
    assert text is not None and parse_cgroup(text) == CgroupOwner(UID, CID)
    assert reader.read(4243) is None  # exited


def test_reads_this_processes_cgroup_from_the_real_proc() -> None:
    if not Path("/proc/self/cgroup").exists():
        pytest.skip("no procfs")
    assert ProcCgroupReader().read(os.getpid()) == Path("/proc/self/cgroup").read_text()


@pytest.mark.parametrize("who", ["0", "1", "itself"])
def test_killer_refuses_init_and_itself(who: str) -> None:
    pid = os.getpid() if who == "itself" else int(who)  # named, not numbered: same in every worker
    with pytest.raises(PermissionError, match=f"refusing to signal PID {pid}"):
        SignalKiller().kill(pid)
