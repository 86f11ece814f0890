"""The elastic duty's outer loop over real container directories: from each process's real share
(a fake NVML source) it raises the scale of a busy container held below its allowance, lowers it
for one above (alone too: several streams at once measure more than the wall time), raises
nobody while some utilisation is unattributed, and goes back to neutral when the source fails."""

from __future__ import annotations

import uuid
from pathlib import Path

from vgpu.adapters.container_dirs import ContainerDirs, read_limits
from vgpu.agent.elastic import ElasticDuty
from vgpu.core.errors import VgpuError
from vgpu.node.limits_file import ACTIVITY_MAGIC_V1, ACTIVITY_NAME, DeviceLimit, render_activity

G0 = f"GPU-{uuid.UUID(int=1)}"
NOW = 10**12
GIB = 1 << 30


class FakeUtilisation:
    """Per-process shares on G0, and which container each process is in."""

    def __init__(self) -> None:
        self.used: dict[int, float] = {}
        self.owner: dict[int, str] = {}
        self.fail = False

    def shares(self) -> dict[str, dict[int, float]]:
        if self.fail:
            raise VgpuError("NVML is gone")
        return {G0: dict(self.used)}

    def container_of(self, pid: int) -> str | None:
        return self.owner.get(pid)


def setup(
    tmp_path: Path, *cores: int
) -> tuple[ContainerDirs, list[str], FakeUtilisation, ElasticDuty]:
    dirs = ContainerDirs(tmp_path)
    cids = [dirs.create([DeviceLimit(G0, GIB, c, c, c)]) for c in cores]
    for cid in cids:
        (dirs.shared_dir(cid) / ACTIVITY_NAME).write_bytes(render_activity([NOW - 1]))
    source = FakeUtilisation()
    duty = ElasticDuty(
        dirs, tmp_path / "checkpoint", clock_ns=lambda: NOW, utilisation=source, correct_s=0
    )
    return dirs, cids, source, duty


def scale(dirs: ContainerDirs, cid: str) -> int:
    return read_limits(dirs.limits_dir(cid))[0].scale


def run(source: FakeUtilisation, cids: list[str], *shares: float) -> None:
    for pid, (cid, share) in enumerate(zip(cids, shares, strict=True), start=100):
        source.used[pid] = share
        source.owner[pid] = cid


def test_a_busy_container_below_its_allowance_is_scaled_up_one_above_down(tmp_path: Path) -> None:
    dirs, (a, b), source, duty = setup(tmp_path, 30, 70)
    run(source, [a, b], 20.0, 60.0)
    duty.step()
    assert scale(dirs, a) > 1000 and scale(dirs, b) > 1000
    before = scale(dirs, a)
    run(source, [a, b], 40.0, 60.0)
    duty.step()
    assert scale(dirs, a) < before


def test_alone_a_container_held_below_its_allowance_is_scaled_up_one_at_it_is_not(
    tmp_path: Path,
) -> None:
    """Alone, a container on several streams at once is measured a multiple of its wall time."""
    dirs, (a,), source, duty = setup(tmp_path, 30)
    run(source, [a], 30.0)
    duty.step()
    assert scale(dirs, a) == 1000
    run(source, [a], 8.0)
    duty.step()
    assert scale(dirs, a) > 1000


def test_no_scale_rises_while_a_process_on_the_gpu_is_in_no_known_container(
    tmp_path: Path,
) -> None:
    dirs, (a, b), source, duty = setup(tmp_path, 30, 70)
    run(source, [a, b], 20.0, 60.0)
    source.used[999] = 10.0  # no owner
    duty.step()
    assert scale(dirs, a) == 1000 and scale(dirs, b) == 1000


def test_a_container_whose_library_predates_scale_gets_none(tmp_path: Path) -> None:
    """Its library would refuse a limits file with `scale` (and fail closed at start)."""
    dirs, (a, b), source, duty = setup(tmp_path, 30, 70)
    (dirs.shared_dir(a) / ACTIVITY_NAME).write_bytes(render_activity([NOW - 1], ACTIVITY_MAGIC_V1))
    run(source, [a, b], 20.0, 60.0)
    duty.step()
    assert scale(dirs, a) == 1000 and scale(dirs, b) > 1000
    assert "scale" not in (dirs.limits_dir(a) / "limits").read_text()


def test_a_failing_source_puts_every_scale_back_to_neutral(tmp_path: Path) -> None:
    dirs, (a, b), source, duty = setup(tmp_path, 30, 70)
    run(source, [a, b], 20.0, 60.0)
    duty.step()
    assert scale(dirs, a) > 1000
    source.fail = True
    duty.step()
    assert scale(dirs, a) == 1000 and scale(dirs, b) == 1000
