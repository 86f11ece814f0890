"""The leader's pass keeps idle GPUs for a queue waiting for whole GPUs: a small pod it releases
goes to a hole, not to the idle GPU its policy prefers (`vgpu.core.queues.whole_gpus`, the
simulator's placement too). `spread` prefers the emptiest GPU, so the idle one."""

from __future__ import annotations

from tests.extender.builders import make_node
from tests.extender.conftest import Harness
from tests.extender.test_queue_release import _daemon, _held, _pass, _queues, _releaser, _watched
from vgpu.core.ids import GpuUUID, PodKey
from vgpu.core.policy.specs import parse_policy
from vgpu.extender.queues.release_loop import QueueReleaser


def _gpu(releaser: QueueReleaser, key: str) -> GpuUUID:
    held = releaser.index.parts.cache.holding(PodKey(key))
    assert held is not None
    (share,) = held.assignment.shares
    return share.uuid


def _setup(harness: Harness, whole_cores: int) -> tuple[QueueReleaser, GpuUUID]:
    """Two GPUs; a first pass puts small's 75-core pod on one; then whole asks `whole_cores`
    and small a 25-core pod."""
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness, policy=parse_policy("spread"))
    _queues(harness, {"name": "small", "weight": 1}, {"name": "whole", "weight": 1})
    _held(harness, "s0", "small", 75)
    _watched(daemon, "small/s0")
    releaser = _releaser(daemon)
    assert _pass(releaser) == ["s0"]
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
