"""The extender's indexes hold what is live, not everything ever seen: its memory must not grow
with the pods it has scheduled."""

from __future__ import annotations

from typing import cast

from tests.extender.builders import make_node, make_pod
from vgpu.adapters.kube.calls import KubeApi, KubeNotFound
from vgpu.api.gang import GANG_NAME, GANG_SIZE
from vgpu.core.ids import PodKey
from vgpu.core.model import Assignment, Phase
from vgpu.daemons.extender.daemon import PodGroupSizes
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.service import Extender
from vgpu.extender.wire import ExtenderArgs


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


def test_a_pod_deleted_before_its_bind_leaves_no_pick_or_assumption_timer_behind() -> None:
    """A pick (filter passed one node) or a bind's assumption of a pod that is then deleted is
    released with the pod; its expiry timer must go too, not wait for a sweep (100,000 pod
    lives kept some 4,000 such timers in the RSS bench, which never sweeps)."""
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    cache.apply_node("ADDED", make_node("n1", gpus=1))
    ext = Extender(cache, config=ExtenderConfig())
    picked, assumed = make_pod("picked", cores=10), make_pod("assumed", cores=10)
    for pod in (picked, assumed):
        pod["metadata"]["uid"] = f"uid-{pod['metadata']['name']}"  # watched: same UID
        cache.apply_pod("ADDED", pod)
    assert ext.filter(ExtenderArgs(picked, ["n1"])).passed == ["n1"]
    held = cache.holding(PodKey("default/picked"))
    assert held is not None and held.phase is Phase.ASSUMED  # the pick
    place = ext.cache.place(
        cache.pods[PodKey("default/assumed")], "n1", ext.pods.policies.default, ext.scheduler
    )
    assert isinstance(place, Assignment)
    cache.assume(place, now=0.0)
    cache.bind_done(place.pod)
    for pod in (picked, assumed):
        cache.apply_pod("DELETED", pod)
    assert list(cache.ledger.holdings()) == []
    binds = cache._binds
    assert (binds._picked_at, binds._assumed_at) == ({}, {})


def test_a_pod_read_for_a_bind_is_not_added_back_after_the_watch_deleted_it() -> None:
    """Bind reads a pod the watch has not shown from the API server; if the watch shows it
    created and deleted before the bind adds that read, the read is of a gone pod: it must not
    stay in the book until the next rebuild."""
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    pod = make_pod("p", cores=10)
    pod["metadata"]["uid"] = "uid-p"
    read = cache.parse(pod)  # the bind's GET, before the watch's events
    cache.apply_pod("ADDED", pod)
    cache.apply_pod("DELETED", pod)
    cache.remember(pod, read)
    assert cache.pod(PodKey("default/p")) is None
    again = make_pod("q", cores=10)  # a pod the watch never showed is still added
    again["metadata"]["uid"] = "uid-q"
    cache.remember(again, cache.parse(again))
    assert cache.pod(PodKey("default/q")) is not None


def test_the_deleted_pods_kept_for_bind_reads_are_bounded() -> None:
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    for i in range(5000):
        pod = make_pod(f"p{i}", cores=10)
        pod["metadata"]["uid"] = f"uid-{i}"
        cache.apply_pod("ADDED", pod)
        cache.apply_pod("DELETED", pod)
    assert len(cache._watch._gone) == 4096


class _NoPodGroups:
    """An API server without the PodGroups the pods name (each read is a 404)."""

    def get_pod_group(self, namespace: str, name: str) -> dict[str, object]:
        raise KubeNotFound(f"podgroup {namespace}/{name} not found", status=404)


def test_the_pod_group_sizes_kept_are_bounded_whatever_names_pods_invent() -> None:
    """A tenant creates pods naming a new `scheduling.x-k8s.io/pod-group` each (no PodGroup
    needed: a 404 is kept too); every filter of one read a size and kept it for good, so the
    extender's memory grew with the names a tenant invented."""
    now = [0.0]
    sizes = PodGroupSizes(cast(KubeApi, _NoPodGroups()), ttl=30.0, clock=lambda: now[0])
    for i in range(20_000):
        now[0] = i * 0.01  # 100 names a second, each past its time after 30 s
        assert sizes("tenant", f"g{i}") is None
    assert len(sizes) <= PodGroupSizes.KEPT
    assert len(sizes) <= 30.0 / 0.01 + 1  # and no entry past its time is kept beside a new one
