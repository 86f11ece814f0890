"""The cache's bind operations: an assumption lives while its bind is in flight or young, and
only an assumption (never a bound holding) is dropped when a bind fails."""

from __future__ import annotations

from tests.extender.builders import make_node, make_pod
from vgpu.api.podspec import PodSpec
from vgpu.core.ids import NodeName, PodKey
from vgpu.core.model import Assignment, Phase
from vgpu.core.policy.specs import make_policy, parse_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.workload import DEFAULT_WORKLOAD
from vgpu.extender.cache.cluster import ClusterCache

KEY = b"k" * 32


def _cache() -> tuple[ClusterCache, Assignment]:
    cache = ClusterCache(key=KEY, memory_unit_mib=256)
    cache.apply_node("ADDED", make_node("n1"))
    return cache, Assignment(PodKey("default/p"), NodeName("n1"), cpu_milli=1000)


def test_an_assumption_expires_only_after_its_bind_returned_and_ttl_passed() -> None:
    cache, a = _cache()
    cache.assume(a, now=100.0)
    assert cache.binding(a.pod)
    cache.expire_assumptions(now=200.0, ttl=30.0, pick_ttl=5.0)
    assert cache.holding(a.pod) is not None  # bind still in flight
    cache.bind_done(a.pod)
    assert not cache.binding(a.pod)
    cache.expire_assumptions(now=120.0, ttl=30.0, pick_ttl=5.0)
    assert cache.holding(a.pod) is not None  # young
    cache.expire_assumptions(now=130.0, ttl=30.0, pick_ttl=5.0)
    assert cache.holding(a.pod) is None


def test_drop_assumption_keeps_a_bound_holding() -> None:
    cache, a = _cache()
    cache.assume(a, now=0.0)
    cache.bind_done(a.pod)
    dropped = cache.drop_assumption(a.pod)
    assert dropped is not None and dropped.phase is Phase.ASSUMED
    assert cache.holding(a.pod) is None
    cache.assume(a, now=0.0)
    bound = make_pod("p")
    bound["spec"]["nodeName"] = "n1"
    cache.apply_pod("MODIFIED", bound)  # the watch shows it bound
    assert cache.drop_assumption(a.pod) is None
    held = cache.holding(a.pod)
    assert held is not None and held.phase is Phase.BOUND


def _gang_cache() -> tuple[ClusterCache, list[PodSpec], Scheduler]:
    cache = ClusterCache(key=KEY, memory_unit_mib=256, gang_timeout=60.0)
    cache.apply_node("ADDED", make_node("n1"))
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}
    specs = []
    for name in ("a", "b"):
        pod = make_pod(name, cores=50, annotations=gang)
        cache.apply_pod("ADDED", pod)
        specs.append(cache.parse(pod))
    return cache, specs, cache.scheduler(make_policy(parse_policy("default"), DEFAULT_WORKLOAD))


def test_the_cache_owns_its_gangs_a_rebuild_forgets_their_reservations() -> None:
    cache, (a, b), scheduler = _gang_cache()
    placed = cache.held_place(a, 2, scheduler, now=0.0)
    assert isinstance(placed, Assignment)
    assert cache.gangs.counts()["reserved"] == 1
    assert {cache.holding(s.request.key).phase for s in (a, b)} == {Phase.RESERVED}  # type: ignore[union-attr]
    cache.replace_all([make_node("n1")], [])
    assert cache.gangs.counts()["reserved"] == 0
    assert cache.holding(a.request.key) is None


def test_a_failed_bind_gives_a_gang_not_yet_started_back_whole() -> None:
    cache, (a, b), scheduler = _gang_cache()
    placed = cache.held_place(a, 2, scheduler, now=0.0)
    assert isinstance(placed, Assignment)
    cache.assume(placed, now=0.0)
    cache.bind_done(a.request.key)
    cache.bind_failed(a.request.key)
    assert cache.holding(a.request.key) is None
    assert cache.holding(b.request.key) is None  # the gang is planned anew
    assert cache.gangs.counts()["reserved"] == 0


def test_a_deleted_member_gives_a_waiting_gang_back() -> None:
    cache, (a, _), scheduler = _gang_cache()
    assert isinstance(cache.held_place(a, 2, scheduler, now=0.0), Assignment)
    cache.apply_pod("DELETED", make_pod("b", cores=50))
    assert cache.holding(a.request.key) is None
    assert cache.gangs.counts()["reserved"] == 0
