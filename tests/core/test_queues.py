"""Deserved shares by water-filling (vgpu.core.queues.proportion): split by weight among backlogged
queues, never above capacity or what a queue can use, capped, independent of queue order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.core.errors import ConfigError
from vgpu.core.queues.proportion import QueueSpec, deserved, overused, share

units = st.integers(min_value=0, max_value=5_000)
vecs = st.tuples(units, units)


@st.composite
def queue_sets(
    draw: st.DrawFn,
) -> tuple[tuple[int, int], list[QueueSpec], dict[str, tuple[int, int]]]:
    capacity = draw(vecs)
    n = draw(st.integers(min_value=1, max_value=6))
    specs = [
        QueueSpec(
            f"q{i}",
            weight=draw(st.integers(min_value=1, max_value=9)),
            cap=draw(st.none() | vecs),
        )
        for i in range(n)
    ]
    requests = {s.name: draw(vecs) for s in specs}
    return capacity, specs, requests


def test_weights_one_to_three_both_backlogged_split_a_quarter_and_three_quarters() -> None:
    capacity = (6_400, 2_048)
    got = deserved(
        capacity,
        [QueueSpec("a", weight=1), QueueSpec("b", weight=3)],
        {"a": (10_000, 9_000), "b": (10_000, 9_000)},
    )
    assert abs(got["a"][0] - 1_600) <= 1 and abs(got["b"][0] - 4_800) <= 1
    assert abs(got["a"][1] - 512) <= 1 and abs(got["b"][1] - 1_536) <= 1


def test_a_queue_asking_ten_percent_gets_it_and_the_rest_goes_to_the_other() -> None:
    got = deserved(
        (1_000, 400),
        [QueueSpec("small", weight=5), QueueSpec("big", weight=1)],
        {"small": (100, 40), "big": (5_000, 5_000)},
    )
    assert got == {"small": (100, 40), "big": (900, 360)}


def test_a_cap_bounds_deserved_and_frees_the_rest() -> None:
    got = deserved(
        (1_000, 100),
        [QueueSpec("a", cap=(200, 100)), QueueSpec("b")],
        {"a": (1_000, 100), "b": (1_000, 100)},
    )
    assert got == {"a": (200, 50), "b": (800, 50)}


@settings(max_examples=300, deadline=None)
@given(queue_sets())
def test_deserved_never_exceeds_capacity_or_what_a_queue_can_use(
    case: tuple[tuple[int, int], list[QueueSpec], dict[str, tuple[int, int]]],
) -> None:
    capacity, specs, requests = case
    got = deserved(capacity, specs, requests)
    for d in (0, 1):
        assert sum(v[d] for v in got.values()) <= capacity[d]
        wanted = sum(min(requests[s.name][d], (s.cap or requests[s.name])[d]) for s in specs)
        # work-conserving: everything asked is handed out while capacity lasts
        assert sum(v[d] for v in got.values()) == min(capacity[d], wanted)
    for s in specs:
        assert got[s.name][0] <= requests[s.name][0] and got[s.name][1] <= requests[s.name][1]
        if s.cap is not None:
            assert got[s.name][0] <= s.cap[0] and got[s.name][1] <= s.cap[1]


@settings(max_examples=200, deadline=None)
@given(queue_sets(), st.randoms(use_true_random=False))
def test_deserved_does_not_depend_on_queue_order(
    case: tuple[tuple[int, int], list[QueueSpec], dict[str, tuple[int, int]]], rnd: object
) -> None:
    capacity, specs, requests = case
    shuffled = list(specs)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert deserved(capacity, specs, requests) == deserved(capacity, shuffled, requests)


@settings(max_examples=200, deadline=None)
@given(queue_sets())
def test_deserved_is_within_one_unit_of_the_exact_weighted_split_for_backlogged_queues(
    case: tuple[tuple[int, int], list[QueueSpec], dict[str, tuple[int, int]]],
) -> None:
    capacity, specs, _ = case
    huge = {s.name: (10**6, 10**6) for s in specs}
    plain = [QueueSpec(s.name, weight=s.weight) for s in specs]
    got = deserved(capacity, plain, huge)
    total = sum(s.weight for s in plain)
    for s in plain:
        for d in (0, 1):
            assert abs(got[s.name][d] - capacity[d] * s.weight / total) < 1


def test_share_is_the_dominant_ratio_and_overuse_is_reaching_it() -> None:
    assert share((50, 10), (100, 100)) == pytest.approx(0.5)
    assert share((0, 0), (0, 0)) == 0
    assert share((1, 0), (0, 5)) > 1_000
    assert overused((100, 100), (100, 100)) and overused((100, 99), (100, 100))
    assert not overused((99, 99), (100, 100))


def test_a_dimension_only_one_queue_asks_cannot_keep_it_from_being_overused() -> None:
    """Memory asked by one queue alone: it deserves all it asks, so it never holds all of it
    while a pod waits; over its share of cores, it is still overused."""
    specs = [QueueSpec("cores", 1), QueueSpec("memory", 2)]
    due = deserved((600, 100), specs, {"cores": (900, 0), "memory": (900, 90)})
    assert due == {"cores": (200, 0), "memory": (400, 90)}
    assert overused((500, 60), due["memory"])


@settings(max_examples=200, deadline=None)
@given(held=vecs, due=vecs)
def test_overused_is_exactly_a_share_of_one_or_more(
    held: tuple[int, int], due: tuple[int, int]
) -> None:
    assert overused(held, due) == (share(held, due) >= 1)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"weight": 0}, "weight"),
        ({"weight": True}, "weight"),
        ({"cap": (-1, 0)}, "cap"),
        ({"strict_s": float("nan")}, "strict hold"),
    ],
)
def test_malformed_queue_settings_are_refused_naming_the_field(
    kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        QueueSpec("team-a", **kwargs)  # type: ignore[arg-type]
