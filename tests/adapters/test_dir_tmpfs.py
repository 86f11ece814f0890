"""Each container directory on a tmpfs of its own (`--container-dir-tmpfs`): one container that
fills its directory takes no room from another, a directory is unmounted when it is freed, and a
mount that fails refuses the container, naming the cause and the option.

The mounts are made in a mount namespace of the test's own (`unshare -rm`), over a node-wide
tmpfs such as the chart's `nodeAgent.containerDirs.size` mounts: without a tmpfs per directory,
one container filling that tmpfs leaves another none (the gap the option closes)."""

from __future__ import annotations

import argparse
import errno
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vgpu.adapters import container_dirs
from vgpu.adapters.container_dirs import ContainerDirs, claim_dirs
from vgpu.adapters.dir_mounts import page_size
from vgpu.daemons.dra_driver import cli as dra_cli
from vgpu.daemons.flags.mode import grant_settings
from vgpu.daemons.node_agent import cli as agent_cli
from vgpu.node.container_dirs import DirectoryLimit, DirOwner
from vgpu.node.grants import GpuLimit, GrantMode, Refusal
from vgpu.node.shared_bound import DirTmpfs, dir_tmpfs
from vgpu.node.vgpucore import VgpuCore

UUID = "GPU-00000000-0000-0000-0000-000000000001"
TENANTS = """
import errno, json, sys, time
from pathlib import Path
from vgpu.adapters.container_dirs import ContainerDirs, write_limits
from vgpu.adapters.dir_mounts import mount_tmpfs, page_size
from vgpu.node.container_dirs import DirOwner
from vgpu.node.grants import GrantMode
from vgpu.node.limits_file import DeviceLimit
from vgpu.node.shared_bound import STATE_BYTES, DirTmpfs, dir_tmpfs
state, each = Path(sys.argv[1]), sys.argv[2] == "each"
root = state / "containers"
root.mkdir(parents=True)
mount_tmpfs(root, DirTmpfs(1 << 20, 100_000))  # the node's tmpfs (containerDirs.size)
dirs = ContainerDirs(state, grace_s=0.0, clock=lambda: time.time() + 1)
if each:
    dirs.mount_each(dir_tmpfs(GrantMode.VGPU_CORE, page_size()))
devices = [DeviceLimit(sys.argv[3], 1 << 30, 50, 50, 50)]
a = dirs.create(devices, DirOwner("team-a", "uid-a", "main"))
b = dirs.create(devices, DirOwner("team-b", "uid-b", "main"))
def attempt(write):
    try:
        write()
        return ""
    except OSError as e:
        return errno.errorcode[e.errno]
said = {
    "a_fills": attempt(lambda: (dirs.shared_dir(a) / "state").write_bytes(b"x" * (4 << 20))),
    "b_state": attempt(lambda: (dirs.shared_dir(b) / "state").write_bytes(b"s" * STATE_BYTES)),
    "b_limits": attempt(lambda: write_limits(dirs.limits_dir(b), devices)),
}
def mounted():
    with open("/proc/self/mountinfo") as f:
        return sum(1 for line in f if f" {root}/" in line)
said["mounted"] = mounted()
said["checked"] = dirs.check_mount() if each else None
said["freed"] = sorted(dirs.collect(frozenset())) == sorted([a, b])
said["mounted_after"], said["left"] = mounted(), sorted(p.name for p in root.iterdir())
print(json.dumps(said))
"""


def _in_own_namespace(tmp_path: Path, each: bool) -> dict[str, object]:
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    probe = subprocess.run(["unshare", "-rm", "true"], check=False, capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user and mount namespaces here: {probe.stderr.decode().strip()}")
    how = "each" if each else "node"
    out = subprocess.run(
        ["unshare", "-rm", sys.executable, "-c", TENANTS, str(tmp_path / "state"), how, UUID],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_one_container_filling_its_directory_takes_no_room_from_another(tmp_path: Path) -> None:
    said = _in_own_namespace(tmp_path, each=True)
    assert said["a_fills"] == "ENOSPC"  # the burst stops at its own directory's size
    assert (said["b_state"], said["b_limits"]) == ("", "")
    assert said["mounted"] == 2


def test_without_a_tmpfs_per_directory_one_container_starves_the_others(tmp_path: Path) -> None:
    """The gap of the node-wide tmpfs alone, which the option closes."""
    said = _in_own_namespace(tmp_path, each=False)
    assert said["a_fills"] == "ENOSPC" and said["b_state"] == "ENOSPC"
    assert said["mounted"] == 0


def test_a_freed_directory_is_unmounted_and_removed(tmp_path: Path) -> None:
    said = _in_own_namespace(tmp_path, each=True)
    assert said["freed"] is True
    assert said["checked"] is None  # the start check mounts and frees its probe
    assert (said["mounted_after"], said["left"]) == (0, [])


def _refused_mount(path: Path, tmpfs: DirTmpfs) -> None:
    raise OSError(errno.EPERM, "Operation not permitted", str(path))


def test_a_mount_that_fails_refuses_the_container_naming_the_cause_and_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(container_dirs, "mount_tmpfs", _refused_mount)
    dirs = ContainerDirs(tmp_path)
    dirs.mount_each(DirTmpfs(1 << 20, 16))
    with pytest.raises(DirectoryLimit) as refused:
        dirs.create(None, DirOwner("team-a", "uid-1", "main"))
    message = str(refused.value)
    assert "cannot mount a tmpfs of 1048576 bytes" in message
    assert "Operation not permitted" in message
    assert "--container-dir-tmpfs" in message and "perContainerTmpfs" in message
    assert list(dirs.ids()) == []  # nothing left to count against the bounds
    problem = dirs.check_mount()  # what the daemon logs at start
    assert problem is not None and "--container-dir-tmpfs" in problem
    assert "every container is refused" in problem and not any(tmp_path.rglob("*check*"))
    core = VgpuCore("/lib/vgpu.so", "/etc/ld.so.preload", dirs)
    grant = core.enforce([GpuLimit(UUID, 50, 1024)], None)
    assert isinstance(grant, Refusal) and "not admitted unenforced" in grant.reason
    assert "perContainerTmpfs" in grant.reason  # what the kubelet puts in the pod's status


def test_without_the_option_no_directory_is_mounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(container_dirs, "mount_tmpfs", _refused_mount)
    dirs = ContainerDirs(tmp_path)
    cid = dirs.create(None)
    assert dirs.shared_dir(cid).is_dir()


def _args(daemon: str, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vgpu")
    subs = parser.add_subparsers(dest="command", required=True)
    (agent_cli if daemon == "node-agent" else dra_cli).add_parser(subs)
    return parser.parse_args([daemon, *argv])


@pytest.mark.parametrize("daemon", ["node-agent", "dra-driver"])
def test_both_daemons_mount_each_directory_through_the_one_flag(
    daemon: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node agent's directories and the DRA driver's claim directories go through the same
    code; without the flag neither mounts anything."""
    mounted: list[tuple[str, DirTmpfs]] = []
    monkeypatch.setattr(
        container_dirs, "mount_tmpfs", lambda path, tmpfs: mounted.append((path.name, tmpfs))
    )
    for flag in ([], ["--container-dir-tmpfs"]):
        args = _args(daemon, "--mode", "hami", "--state-dir", str(tmp_path), *flag)
        dirs = claim_dirs(tmp_path) if daemon == "dra-driver" else ContainerDirs(tmp_path)
        grant_settings(args, dirs)
        cid = dirs.create(None)
    each = dir_tmpfs(GrantMode.HAMI, page_size())
    assert mounted == [(".mount-check", each), (cid, each)]  # the start check, then the directory


def test_a_daemon_without_mount_rights_says_so_at_start_and_claims_no_bound_per_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(container_dirs, "mount_tmpfs", _refused_mount)
    args = _args(
        "node-agent", "--mode", "hami", "--state-dir", str(tmp_path), "--container-dir-tmpfs"
    )
    dirs = ContainerDirs(tmp_path)
    with caplog.at_level(logging.INFO):
        grant_settings(args, dirs)
    said = {r.levelname: r.getMessage() for r in caplog.records if "tmpfs" in r.getMessage()}
    assert "every container is refused until it can" in said["ERROR"]
    assert "per container" not in said["WARNING"]  # the start line: periodic bound only
    with pytest.raises(DirectoryLimit, match="--container-dir-tmpfs"):
        dirs.create(None)  # and still fails closed


def test_the_start_check_frees_what_an_interrupted_start_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(container_dirs, "mount_tmpfs", lambda path, tmpfs: None)
    dirs = ContainerDirs(tmp_path)
    left = dirs.root / ".mount-check"
    left.mkdir(parents=True)
    (left / "x").write_bytes(b"")
    dirs.mount_each(DirTmpfs(1 << 20, 16))
    assert dirs.check_mount() is None and not left.exists()
