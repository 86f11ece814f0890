"""The extender's gang gauges follow the gangs' pods: a gang that cannot be placed counts as
unplaceable while its members exist, and no longer once they are deleted (the gauge once
stayed 1 after the gang was deleted, so VgpuGangsUnplaceable fired for nothing)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.extender.builders import make_node, make_pod
from vgpu.api.podspec import PodSpec
from vgpu.core.policy.specs import make_policy, parse_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.workload import DEFAULT_WORKLOAD
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.gangs.coordinator import GangWait

KEY = b"k" * 32


def _unplaceable(names: list[str]) -> tuple[ClusterCache, list[PodSpec], Scheduler]:
    """A gang of whole-GPU members, one more than the only node's GPUs."""
    cache = ClusterCache(key=KEY, memory_unit_mib=256, gang_timeout=60.0)
    cache.apply_node("ADDED", make_node("n1", gpus=len(names) - 1))
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": str(len(names))}
    specs = []
    for name in names:
        pod = make_pod(name, cores=100, annotations=gang)
        cache.apply_pod("ADDED", pod)
        specs.append(cache.parse(pod))
    return cache, specs, cache.scheduler(make_policy(parse_policy("default"), DEFAULT_WORKLOAD))


def test_a_gang_that_does_not_fit_is_unplaceable_while_its_members_exist() -> None:
    cache, (a, _), scheduler = _unplaceable(["a", "b"])
    assert isinstance(cache.held_place(a, 2, scheduler, now=0.0), GangWait)
    assert cache.gangs.counts()["unplaceable"] == 1
    cache.apply_pod("DELETED", make_pod("b", cores=100))
    assert cache.gangs.counts()["unplaceable"] == 1  # a is still there and still waits


def test_a_deleted_unplaceable_gang_is_no_longer_counted() -> None:
    cache, (a, _), scheduler = _unplaceable(["a", "b"])
    assert isinstance(cache.held_place(a, 2, scheduler, now=0.0), GangWait)
    for name in ("a", "b"):
        cache.apply_pod("DELETED", make_pod(name, cores=100))
    assert cache.gangs.counts() == {"reserved": 0, "unplaceable": 0}


@settings(max_examples=25, deadline=None)
@given(st.permutations(["a", "b", "c"]), st.integers(min_value=0, max_value=3))
def test_the_unplaceable_gauge_is_one_exactly_while_a_member_exists(
    order: list[str], deleted: int
) -> None:
    cache, specs, scheduler = _unplaceable(["a", "b", "c"])
    assert isinstance(cache.held_place(specs[0], 3, scheduler, now=0.0), GangWait)
    for name in order[:deleted]:
        cache.apply_pod("DELETED", make_pod(name, cores=100))
    assert cache.gangs.counts()["unplaceable"] == (1 if deleted < 3 else 0)
