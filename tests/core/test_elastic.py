"""Elastic cores on one GPU: never below the guarantee, never above the limit, the active
containers never over the GPU when their guarantees fit, idle capacity used, shared fairly, and
a neighbour starting only takes from the others."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.elastic import ElasticShare, allowances, is_active


@st.composite
def gpu_shares(draw: st.DrawFn, fits: bool = False) -> list[ElasticShare]:
    """Shares of one GPU; with `fits`, guarantees within 100 as the extender places them."""
    n = draw(st.integers(0, 8))
    shares = []
    room = 100
    for i in range(n):
        top = room if fits else 100
        if top < 1:
            break
        cores = draw(st.integers(1, top))
        room -= cores
        shares.append(
            ElasticShare(f"c{i}", cores, draw(st.integers(cores, 100)), draw(st.booleans()))
        )
    return shares


@given(gpu_shares())
def test_every_allowance_is_between_guarantee_and_limit(shares: list[ElasticShare]) -> None:
    got = allowances(shares)
    assert set(got) == {s.key for s in shares}
    for s in shares:
        assert s.cores <= got[s.key] <= s.limit


@given(gpu_shares())
def test_an_idle_container_is_held_to_its_guarantee(shares: list[ElasticShare]) -> None:
    got = allowances(shares)
    assert all(got[s.key] == s.cores for s in shares if not s.active)


@given(gpu_shares(fits=True))
def test_active_containers_never_exceed_the_gpu_and_use_all_idle_capacity(
    shares: list[ElasticShare],
) -> None:
    got = allowances(shares)
    active = [s for s in shares if s.active]
    total = sum(got[s.key] for s in active)
    assert total <= 100
    assert total == min(100, sum(s.limit for s in active))  # work-conserving


@given(gpu_shares(fits=True))
def test_the_extra_is_shared_max_min_fairly(shares: list[ElasticShare]) -> None:
    got = allowances(shares)
    extra = {s.key: got[s.key] - s.cores for s in shares if s.active}
    for s in shares:
        if s.active and got[s.key] < s.limit:  # not capped: nobody got 2 points more
            assert all(e <= extra[s.key] + 1 for e in extra.values())


@given(gpu_shares(), st.data())
def test_a_neighbour_starting_never_raises_anyone_and_gets_its_guarantee_back(
    shares: list[ElasticShare], data: st.DataObject
) -> None:
    idle = [s for s in shares if not s.active]
    if not idle:
        return
    waking = data.draw(st.sampled_from(idle))
    after = [ElasticShare(s.key, s.cores, s.limit, True) if s is waking else s for s in shares]
    before_got, after_got = allowances(shares), allowances(after)
    assert after_got[waking.key] >= waking.cores
    assert all(after_got[s.key] <= before_got[s.key] for s in shares if s is not waking)


def test_alone_a_container_reaches_its_limit_and_gives_back_its_neighbours_guarantee() -> None:
    a = ElasticShare("a", 30, 80, True)
    b = ElasticShare("b", 50, 50, False)
    assert allowances([a, b]) == {"a": 80, "b": 50}
    assert allowances([a, ElasticShare("b", 50, 50, True)]) == {"a": 50, "b": 50}
    assert allowances([a, ElasticShare("b", 70, 100, True)]) == {"a": 30, "b": 70}


def test_oversubscribed_guarantees_get_their_guarantees_only() -> None:
    shares = [ElasticShare("a", 60, 100, True), ElasticShare("b", 60, 100, True)]
    assert allowances(shares) == {"a": 60, "b": 60}


@pytest.mark.parametrize(("cores", "limit"), [(0, 10), (50, 40), (10, 101)])
def test_a_share_outside_the_bounds_is_refused(cores: int, limit: int) -> None:
    with pytest.raises(ValueError, match="need 0 < cores"):
        ElasticShare("x", cores, limit, True)


def test_activity_is_a_recent_launch() -> None:
    assert not is_active(0, 10**9, 5 * 10**8)
    assert is_active(9 * 10**8, 10**9, 5 * 10**8)
    assert not is_active(4 * 10**8, 10**9, 5 * 10**8)
