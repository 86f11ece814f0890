"""The shared files' bound is hard where the container directories sit on a size-limited
filesystem of their own, and the daemon's start line says which bound holds.

The size-limited `tmpfs` is made by bubblewrap (`--size --tmpfs`, a mount namespace of the test's
own), as the chart's init container mounts one on the node; the check runs inside it."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vgpu.adapters.shared_files import mount_facts, report_bound

SIZE = 1 << 20
CHECK = """
import errno, json, logging, sys
from pathlib import Path
from vgpu.adapters.shared_files import report_bound
logging.basicConfig(level=logging.INFO)
root = Path(sys.argv[1])
hard = report_bound(root)
state = root / "c" / "shared" / "state"
state.parent.mkdir(parents=True)
try:
    state.write_bytes(b"x" * (2 * int(sys.argv[2])))  # a tenant's burst past the size
    refused = ""
except OSError as e:
    refused = errno.errorcode[e.errno]
print(json.dumps({"hard": hard, "refused": refused}))
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap (Debian: bubblewrap)")
def test_a_burst_past_a_sized_tmpfs_is_refused_and_the_bound_is_reported_hard(
    tmp_path: Path,
) -> None:
    root = tmp_path / "containers"
    root.mkdir()
    sandbox = ["bwrap", "--dev-bind", "/", "/", "--size", str(SIZE), "--tmpfs", str(root)]
    out = subprocess.run(
        [*sandbox, sys.executable, "-c", CHECK, str(root), str(SIZE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"hard": True, "refused": "ENOSPC"}
    assert f"hard size bound: a tmpfs of their own of {SIZE} bytes" in out.stderr + out.stdout


def test_a_directory_on_the_nodes_own_filesystem_is_reported_periodic(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "containers"
    root.mkdir()
    assert not mount_facts(root).own
    with caplog.at_level(logging.INFO):
        assert not report_bound(root)
    (line,) = [r.getMessage() for r in caplog.records if "container directories" in r.getMessage()]
    assert "periodic bound only" in line and "not a filesystem of their own" in line


def test_a_mount_point_is_found_through_escaped_mountinfo_paths(tmp_path: Path) -> None:
    root = tmp_path / "with space"
    root.mkdir()
    escaped = str(root.resolve()).replace(" ", "\\040")
    info = tmp_path / "mountinfo"
    info.write_text(f"138 118 0:40 / {escaped} rw,relatime - tmpfs none rw,size=1024k\n")
    facts = mount_facts(root, info)
    assert facts.own and facts.fstype == "tmpfs" and facts.size > 0
