"""The agent's elastic duty over real container directories: a container alone reaches its limit,
gives back within one period when a neighbour starts, a container's hostile `activity` neither
misleads nor blocks the agent, a bad directory spoils no other, and a step is cheap."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from vgpu.adapters import container_dirs
from vgpu.adapters.container_dirs import ContainerDirs, read_limits
from vgpu.agent import elastic
from vgpu.agent.elastic import ElasticDuty
from vgpu.node.limits_file import (
    ACTIVITY_NAME,
    LIMITS_NAME,
    STATE_NAME,
    DeviceLimit,
    render_activity,
)
from vgpu.node.shared_bound import STATE_BYTES

G0, G1 = (f"GPU-{uuid.UUID(int=n)}" for n in (1, 2))
NOW = 10**12
GIB = 1 << 30


def make(dirs: ContainerDirs, *devices: DeviceLimit) -> str:
    return dirs.create(list(devices))


def launch(dirs: ContainerDirs, cid: str, *times: int) -> None:
    (dirs.shared_dir(cid) / ACTIVITY_NAME).write_bytes(render_activity(list(times)))


def allowance(dirs: ContainerDirs, cid: str) -> list[int]:
    return [d.allowance for d in read_limits(dirs.limits_dir(cid))]


def duty(dirs: ContainerDirs, tmp_path: Path) -> ElasticDuty:
    return ElasticDuty(dirs, tmp_path / "checkpoint", clock_ns=lambda: NOW)


def test_alone_up_to_the_limit_and_back_within_one_period_when_a_neighbour_starts(
    tmp_path: Path,
) -> None:
    dirs = ContainerDirs(tmp_path)
    a = make(dirs, DeviceLimit(G0, GIB, 30, 80, 30))
    b = make(dirs, DeviceLimit(G0, GIB, 50, 100, 50))
    d = duty(dirs, tmp_path)
    launch(dirs, a, NOW - 1000)
    d.step()
    assert allowance(dirs, a) == [80] and allowance(dirs, b) == [50]
    launch(dirs, b, NOW - 1000)
    d.step()
    assert allowance(dirs, a) == [40] and allowance(dirs, b) == [60]
    launch(dirs, a, NOW - 10**10)  # a went quiet
    d.step()
    assert allowance(dirs, a) == [30] and allowance(dirs, b) == [100]  # a's guarantee is lent


def test_each_gpu_of_a_container_is_its_own_slot(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    a = make(dirs, DeviceLimit(G0, GIB, 30, 60, 30), DeviceLimit(G1, GIB, 30, 60, 30))
    launch(dirs, a, 0, NOW - 1)  # active on G1 only
    duty(dirs, tmp_path).step()
    assert allowance(dirs, a) == [30, 60]


def test_a_fifo_or_symlink_for_activity_neither_blocks_nor_misleads(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    a = make(dirs, DeviceLimit(G0, GIB, 30, 80, 30))
    b = make(dirs, DeviceLimit(G0, GIB, 30, 80, 30))
    for cid in (a, b):  # the agent's own empty files, replaced as a host process could
        (dirs.shared_dir(cid) / ACTIVITY_NAME).unlink()
    os.mkfifo(dirs.shared_dir(a) / ACTIVITY_NAME)
    target = tmp_path / "elsewhere"
    target.write_bytes(render_activity([NOW - 1]))
    (dirs.shared_dir(b) / ACTIVITY_NAME).symlink_to(target)
    done = threading.Event()
    d = duty(dirs, tmp_path)

    def step() -> None:
        d.step()
        done.set()

    threading.Thread(target=step, daemon=True).start()
    assert done.wait(5), "the step blocked on a FIFO in the container's directory"
    assert allowance(dirs, a) == [30] and allowance(dirs, b) == [30]


def test_a_broken_directory_is_logged_once_and_spoils_no_other(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dirs = ContainerDirs(tmp_path)
    bad = make(dirs, DeviceLimit(G0, GIB, 10, 10, 10))
    (dirs.limits_dir(bad) / LIMITS_NAME).unlink()
    good = make(dirs, DeviceLimit(G0, GIB, 30, 80, 30))
    launch(dirs, good, NOW - 1)
    d = duty(dirs, tmp_path)
    with caplog.at_level(logging.WARNING, logger="vgpu.agent.elastic"):
        for _ in range(3):
            d.step()
    assert allowance(dirs, good) == [80]
    assert caplog.text.count(f"container directory {bad}") == 1


def test_a_restarted_agent_reads_the_limits_back(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    a = make(dirs, DeviceLimit(G0, GIB, 30, 80, 30))
    launch(dirs, a, NOW - 1)
    duty(dirs, tmp_path).step()
    again = duty(dirs, tmp_path)
    again.step()
    assert allowance(dirs, a) == [80] and again.writes == 0


def test_directories_the_checkpoint_does_not_name_are_collected(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path, grace_s=0)
    a = make(dirs, DeviceLimit(G0, GIB, 30, 80, 30))
    d = duty(dirs, tmp_path)
    d.step()
    assert list(dirs.ids()) == [a]  # no checkpoint: nothing is judged gone
    (tmp_path / "checkpoint").write_text('{"Data": {"PodDeviceEntries": []}, "Checksum": 0}')
    time.sleep(0.01)
    d._next_collect = 0.0
    d.step()
    assert list(dirs.ids()) == []


def test_a_step_over_a_hundred_containers_is_cheap(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    cids = [make(dirs, DeviceLimit(G0, GIB, 1, 50, 1)) for _ in range(100)]
    for cid in cids[::2]:
        launch(dirs, cid, NOW - 1)
    d = duty(dirs, tmp_path)
    d.step()
    best = min(_timed(d.step) for _ in range(3))
    assert best < 0.1, f"a step took {best * 1000:.0f} ms, over the 100 ms period"


def _timed(step: Callable[[], None]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def test_a_limits_write_that_fails_spoils_no_other_container_nor_the_collect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One container's `limits` that cannot be written (ENOSPC: its own writes filled the
    filesystem its directory sits on) once aborted the whole step: every container after it
    kept its allowance and the collect step, which cuts the shared files back, never ran."""
    dirs = ContainerDirs(tmp_path, grace_s=0)
    a = make(dirs, DeviceLimit(G0, GIB, 30, 80, 30))
    b = make(dirs, DeviceLimit(G1, GIB, 30, 80, 30))
    launch(dirs, a, NOW - 1)
    launch(dirs, b, NOW - 1)
    real = container_dirs.write_limits

    def full_for_a(directory: Path, devices: Sequence[DeviceLimit]) -> None:
        if directory == dirs.limits_dir(a):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory))
        real(directory, devices)

    monkeypatch.setattr(elastic, "write_limits", full_for_a)
    (dirs.shared_dir(a) / STATE_NAME).write_bytes(b"x" * (STATE_BYTES + 4096))
    d = ElasticDuty(dirs, tmp_path / "checkpoint", clock_ns=lambda: NOW, collect_s=0.0)
    with caplog.at_level(logging.WARNING, logger="vgpu.agent.elastic"):
        for _ in range(3):
            d.step()
    assert allowance(dirs, b) == [80]  # the other container is served whatever the order
    assert (dirs.shared_dir(a) / STATE_NAME).stat().st_size == STATE_BYTES  # collect ran
    assert caplog.text.count(f"cannot write the limits of container directory {a}") == 1


TENANT_FILLS = """
import json, sys
from pathlib import Path
from vgpu.adapters import container_dirs
from vgpu.adapters.container_dirs import ContainerDirs, read_limits
from vgpu.adapters.dir_mounts import mount_tmpfs, page_size
from vgpu.agent.elastic import ElasticDuty
from vgpu.node.grants import GrantMode
from vgpu.node.limits_file import DeviceLimit, render_activity
from vgpu.node.shared_bound import DirTmpfs, dir_tmpfs
state, gpu, now = Path(sys.argv[1]), sys.argv[2], 10**12
root = state / "containers"
root.mkdir(parents=True)
mount_tmpfs(root, DirTmpfs(1 << 20, 100_000))
dirs = ContainerDirs(state)
dirs.mount_each(dir_tmpfs(GrantMode.VGPU_CORE, page_size()))
a = dirs.create([DeviceLimit(gpu, 1 << 30, 30, 100, 30)])
b = dirs.create([DeviceLimit(gpu, 1 << 30, 70, 100, 70)])
d = ElasticDuty(dirs, state / "checkpoint", clock_ns=lambda: now, collect_s=3600.0)
def allowance(cid):
    return read_limits(dirs.limits_dir(cid))[0].allowance
(dirs.shared_dir(a) / "activity").write_bytes(render_activity([now - 1000]))
d.step()
said = {"borrowed": allowance(a)}
try:  # the tenant writes past the end of its state until its directory's tmpfs is full
    with open(dirs.shared_dir(a) / "state", "r+b") as f:
        f.seek(200_000)
        f.write(b"x" * (1 << 20))
except OSError as e:
    said["fill"] = e.errno
(dirs.shared_dir(b) / "activity").write_bytes(render_activity([now - 1000]))
d.step()
said["a"], said["b"] = allowance(a), allowance(b)
print(json.dumps(said))
"""


def test_a_container_that_fills_its_own_tmpfs_gives_back_what_it_borrowed(
    tmp_path: Path,
) -> None:
    """Under `--container-dir-tmpfs` a container's `limits` shares its directory's tmpfs with the
    `state` the container writes: filled to ENOSPC, the agent could not lower its allowance when
    its busy neighbour came back, so it kept the neighbour's guarantee (100 + 70 of one GPU)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    probe = subprocess.run(["unshare", "-rm", "true"], check=False, capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user and mount namespaces here: {probe.stderr.decode().strip()}")
    out = subprocess.run(
        ["unshare", "-rm", sys.executable, "-c", TENANT_FILLS, str(tmp_path / "state"), G0],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout)
    assert said["borrowed"] == 100 and said["fill"] == errno.ENOSPC
    assert (said["a"], said["b"]) == (30, 70)
