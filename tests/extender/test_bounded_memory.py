"""Issue 25, finding 8: the extender's indexes hold what is live, not everything ever seen."""

from __future__ import annotations

from tests.extender.builders import make_pod
from vgpu.api.gang import GANG_NAME, GANG_SIZE
from vgpu.extender.cache import ClusterCache


def test_the_gang_index_forgets_a_gang_once_its_last_member_is_gone() -> None:
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    for i in range(500):
        pod = make_pod(f"p{i}", cores=10, annotations={GANG_NAME: f"g{i}", GANG_SIZE: "1"})
        cache.apply_pod("ADDED", pod)
        cache.apply_pod("DELETED", pod)
    assert dict(cache.members) == {}


def test_a_pod_moving_to_another_gang_leaves_no_empty_gang_behind() -> None:
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    pod = make_pod("p", cores=10, annotations={GANG_NAME: "a", GANG_SIZE: "1"})
    cache.apply_pod("ADDED", pod)
    moved = make_pod("p", cores=10, annotations={GANG_NAME: "b", GANG_SIZE: "1"})
    moved["metadata"]["resourceVersion"] = "2"
    cache.apply_pod("MODIFIED", moved)
    assert set(cache.members) == {"default/b"}
