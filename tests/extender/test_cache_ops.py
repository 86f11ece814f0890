"""The cache's bind operations: an assumption lives while its bind is in flight or young, and
only an assumption (never a bound holding) is dropped when a bind fails."""

from __future__ import annotations

from tests.extender.builders import make_node, make_pod
from vgpu.core.ids import NodeName, PodKey
from vgpu.core.model import Assignment, Phase
from vgpu.extender.cache import ClusterCache

KEY = b"k" * 32


def _cache() -> tuple[ClusterCache, Assignment]:
    cache = ClusterCache(key=KEY, memory_unit_mib=256)
    cache.apply_node("ADDED", make_node("n1"))
    return cache, Assignment(PodKey("default/p"), NodeName("n1"), cpu_milli=1000)


def test_an_assumption_expires_only_after_its_bind_returned_and_ttl_passed() -> None:
    cache, a = _cache()
    cache.assume(a, now=100.0)
    assert cache.binding(a.pod)
    cache.expire_assumptions(now=200.0, ttl=30.0)
    assert cache.holding(a.pod) is not None  # bind still in flight
    cache.bind_done(a.pod)
    assert not cache.binding(a.pod)
    cache.expire_assumptions(now=120.0, ttl=30.0)
    assert cache.holding(a.pod) is not None  # young
    cache.expire_assumptions(now=130.0, ttl=30.0)
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
