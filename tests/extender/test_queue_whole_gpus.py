"""The leader's pass keeps idle GPUs for a queue waiting for whole GPUs: a small pod it releases,
or a gang's small members, go to a hole, not to the idle GPU their policy prefers
(`vgpu.core.queues.whole_gpus`, the simulator's placement too); a waiting gang of whole-GPU pods
is waited for like a single one. `spread` prefers the emptiest GPU, so the idle one."""

from __future__ import annotations

from tests.extender.builders import make_node
from tests.extender.conftest import Harness
from tests.extender.test_queue_release import _daemon, _held, _pass, _queues, _releaser, _watched
from vgpu.core.ids import GpuUUID, PodKey
from vgpu.core.policy.specs import parse_policy
from vgpu.daemons.extender.daemon import ExtenderDaemon
from vgpu.extender.queues.release_loop import QueueReleaser


def _gpu(releaser: QueueReleaser, key: str) -> GpuUUID:
    held = releaser.index.parts.cache.holding(PodKey(key))
    assert held is not None
    (share,) = held.assignment.shares
    return share.uuid


def _gang(harness: Harness, queue: str, name: str, *cores: int) -> list[str]:
    """A gang of `queue` (`NAME-i` members asking `cores[i]`), held; their `NS/NAME` keys."""
    gang = {"vgpu.io/gang-name": name, "vgpu.io/gang-size": str(len(cores))}
    for i, c in enumerate(cores):
        _held(harness, f"{name}-{i}", queue, c, annotations=dict(gang))
    return [f"{queue}/{name}-{i}" for i in range(len(cores))]


def _hole(harness: Harness, cores: int) -> tuple[ExtenderDaemon, QueueReleaser]:
    """Two GPUs under `spread`, queues small and whole; a first pass puts small's pod of
    `cores` on one (the hole; the other stays idle)."""
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness, policy=parse_policy("spread"))
    _queues(harness, {"name": "small", "weight": 1}, {"name": "whole", "weight": 1})
    _held(harness, "s0", "small", cores)
    _watched(daemon, "small/s0")
    releaser = _releaser(daemon)
    assert _pass(releaser) == ["s0"]
    return daemon, releaser


def _setup(harness: Harness, whole_cores: int) -> tuple[QueueReleaser, GpuUUID]:
    """A 75-core hole; then whole asks `whole_cores` and small a 25-core pod."""
    daemon, releaser = _hole(harness, 75)
    _held(harness, "w0", "whole", whole_cores)
    _held(harness, "s1", "small", 25)
    _watched(daemon, "whole/w0", "small/s1")
    return releaser, _gpu(releaser, "small/s0")


def test_a_small_pod_goes_to_the_hole_while_a_whole_gpu_job_waits(harness: Harness) -> None:
    releaser, hole = _setup(harness, 200)  # two whole GPUs: waits, one is idle
    assert _pass(releaser) == ["s1"]
    assert _gpu(releaser, "small/s1") == hole


def test_with_no_whole_gpu_job_waiting_the_policy_places_alone(harness: Harness) -> None:
    releaser, hole = _setup(harness, 50)  # a share: nothing to keep idle GPUs for
    assert sorted(_pass(releaser)) == ["s1", "w0"]
    assert _gpu(releaser, "small/s1") != hole  # spread: the emptiest GPU


def _small_gang(harness: Harness, whole_cores: int | None) -> tuple[QueueReleaser, GpuUUID]:
    """A 50-core hole; then small holds a gang of two 25-core members (both fit the hole) and,
    unless None, whole asks `whole_cores`."""
    daemon, releaser = _hole(harness, 50)
    keys = _gang(harness, "small", "g", 25, 25)
    if whole_cores is not None:
        _held(harness, "w0", "whole", whole_cores)
        keys.append("whole/w0")
    _watched(daemon, *keys)
    return releaser, _gpu(releaser, "small/s0")


def test_a_small_gangs_members_go_to_the_hole_while_a_whole_gpu_job_waits(
    harness: Harness,
) -> None:
    releaser, hole = _small_gang(harness, 200)  # two whole GPUs: waits, one is idle
    assert sorted(_pass(releaser)) == ["g-0", "g-1"]
    assert _gpu(releaser, "small/g-0") == _gpu(releaser, "small/g-1") == hole


def test_with_no_whole_gpu_job_waiting_the_gang_planner_places_alone(harness: Harness) -> None:
    releaser, hole = _small_gang(harness, None)
    assert sorted(_pass(releaser)) == ["g-0", "g-1"]
    assert hole not in {_gpu(releaser, "small/g-0"), _gpu(releaser, "small/g-1")}  # spread


def test_a_waiting_gang_of_whole_gpu_pods_keeps_the_idle_gpu_from_a_small_pod(
    harness: Harness,
) -> None:
    """whole's job is a gang of two whole-GPU pods, one GPU idle: it waits, and keeps that GPU."""
    daemon, releaser = _hole(harness, 75)
    _held(harness, "s1", "small", 25)
    _watched(daemon, "small/s1", *_gang(harness, "whole", "w", 100, 100))
    assert _pass(releaser) == ["s1"]
    assert _gpu(releaser, "small/s1") == _gpu(releaser, "small/s0")
