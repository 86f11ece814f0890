"""The agent's elastic duty over real container directories: a container alone reaches its limit,
gives back within one period when a neighbour starts, a container's hostile `activity` neither
misleads nor blocks the agent, a bad directory spoils no other, and a step is cheap."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from vgpu.adapters.container_dirs import ContainerDirs, read_limits
from vgpu.agent.elastic import ElasticDuty
from vgpu.node.limits_file import ACTIVITY_NAME, LIMITS_NAME, DeviceLimit, render_activity

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
