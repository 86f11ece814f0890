"""The agent in mode vgpu-core, through the device-plugin socket as the kubelet calls it: the
answer carries the library, preload, limits and shared mounts and nothing else, the limits file
holds the signed grant, and the running agent's elastic duty lends idle capacity up to
`vgpu.io/cores-limit` and takes it back when a neighbour starts."""

from __future__ import annotations

import time
from pathlib import Path

from tests.node.agent_harness import CORES, make_box
from tests.waiting import holds_within
from vgpu.adapters.container_dirs import ContainerDirs, read_limits
from vgpu.node.grants import GrantMode, GrantSettings
from vgpu.node.limits_file import ACTIVITY_NAME, render_activity
from vgpu.node.vgpucore import (
    ACTIVITY_IN_CONTAINER,
    LIBRARY_IN_CONTAINER,
    LIMITS_IN_CONTAINER,
    PRELOAD_IN_CONTAINER,
    STATE_IN_CONTAINER,
    VgpuCore,
)

LIB, PRELOAD = "/var/lib/vgpu/lib/libvgpu-core.so", "/var/lib/vgpu/lib/ld.so.preload"


def _mounts(response: object) -> dict[str, tuple[str, bool]]:
    (grant,) = response.container_responses  # type: ignore[attr-defined]
    return {m.container_path: (m.host_path, m.read_only) for m in grant.mounts}


def _allowance_reaches(limits: Path, value: int, timeout: float = 5.0) -> bool:
    return holds_within(lambda: read_limits(limits)[0].allowance == value, timeout, interval=0.05)


def _launching(shared: Path) -> None:
    (shared / ACTIVITY_NAME).write_bytes(render_activity([time.monotonic_ns()]))


def test_the_kubelet_gets_the_contract_mounts_and_the_duty_moves_the_allowance(
    tmp_path: Path,
) -> None:
    core = VgpuCore(LIB, PRELOAD, ContainerDirs(tmp_path / "state"))
    for box in make_box():
        box.start_agent(grants=GrantSettings(GrantMode.VGPU_CORE, core=core))
        box.place(
            "a", [("main", 30, 0)], {"main": [(0, 30)]}, annotations={"vgpu.io/cores-limit": "60"}
        )
        _, response = box.kubelet.allocate(CORES, 30)
        (grant,) = response.container_responses
        assert grant.envs["LD_PRELOAD"] == LIBRARY_IN_CONTAINER
        mounts = _mounts(response)
        assert set(mounts) == {
            LIBRARY_IN_CONTAINER,
            PRELOAD_IN_CONTAINER,
            LIMITS_IN_CONTAINER,
            STATE_IN_CONTAINER,
            ACTIVITY_IN_CONTAINER,
        }
        assert mounts[LIBRARY_IN_CONTAINER] == (LIB, True)
        assert mounts[PRELOAD_IN_CONTAINER] == (PRELOAD, True)
        assert mounts[LIMITS_IN_CONTAINER][1] and not mounts[ACTIVITY_IN_CONTAINER][1]
        limits_a = Path(mounts[LIMITS_IN_CONTAINER][0])
        (device,) = read_limits(limits_a)
        assert (device.uuid, device.cores, device.limit, device.allowance) == (
            box.gpus[0],
            30,
            60,
            30,
        )
        assert device.memory == 15360 * 30 // 100 * (1 << 20)

        _launching(Path(mounts[ACTIVITY_IN_CONTAINER][0]).parent)
        assert _allowance_reaches(limits_a, 60), "never lent idle capacity"

        box.place("b", [("main", 50, 0)], {"main": [(0, 50)]})
        _, response_b = box.kubelet.allocate(CORES, 50)
        shared_b = Path(_mounts(response_b)[ACTIVITY_IN_CONTAINER][0]).parent
        _launching(shared_b)
        _launching(Path(mounts[ACTIVITY_IN_CONTAINER][0]).parent)
        assert _allowance_reaches(limits_a, 50), "never gave back"


def test_a_pods_init_containers_share_one_directory_through_the_hand_off(tmp_path: Path) -> None:
    """The kubelet calls Allocate once per init container (seven pods with many init
    containers took every directory of the node); those of equal limits run one at a time and
    share one directory, the app container has its own."""
    dirs = ContainerDirs(tmp_path / "state")
    core = VgpuCore(LIB, PRELOAD, dirs)
    for box in make_box():
        box.start_agent(grants=GrantSettings(GrantMode.VGPU_CORE, core=core))
        init = [(f"init{n}", 20, 0) for n in range(3)]
        gpus = {name: [(0, cores)] for name, cores, _ in [*init, ("main", 30, 0)]}
        box.place("a", [("main", 30, 0)], gpus, init=init)
        shared = []
        for cores in (20, 20, 20, 30):  # the stand-in kubelet does not reuse init devices
            _, response = box.kubelet.allocate(CORES, cores)
            shared.append(_mounts(response)[ACTIVITY_IN_CONTAINER][0])
        assert len(set(shared[:3])) == 1 and shared[3] != shared[0]
        assert len(list(dirs.ids())) == 2
