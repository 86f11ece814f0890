"""The long soak's instruments: the retained size it prints per component, the flatness rule
and the progress reports (`bench/handoff_soak.py`)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from tests.kubelet_model.soak import Progress, SoakConfig, soak
from tests.kubelet_model.soak_memory import MemoryReading, flat, peak, read_memory, retained_size
from tests.kubelet_model.world import World


class Holder:
    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.callback: Callable[[], object] | None = None
        self.harness: Holder | None = None

    def count(self) -> int:
        return len(self.items)


def test_retained_size_grows_with_what_the_root_holds() -> None:
    small = retained_size([Holder([f"s{i}" for i in range(10)])])
    large = retained_size([Holder([f"s{i}" for i in range(1000)])])
    assert large - small >= 990 * sys.getsizeof("s999")


def test_retained_size_counts_a_shared_object_once() -> None:
    shared = ["x" * 10_000]
    one = retained_size([Holder(shared)])
    both = retained_size([Holder(shared), Holder(shared)])
    assert both - one < 1_000


BIG = ["z" * 100_000]


def test_retained_size_counts_what_a_closure_captures_not_its_globals() -> None:
    big = ["y" * 100_000]
    owner = Holder([])
    owner.callback = lambda: big
    assert retained_size([owner]) > 100_000
    owner.callback = lambda: BIG
    assert retained_size([owner]) < 10_000
    owner.callback = owner.count  # a bound method: its object, already counted
    assert retained_size([owner]) < 10_000


def test_retained_size_does_not_enter_stop_objects() -> None:
    big = ["y" * 100_000]
    beside = Holder([])
    beside.harness = Holder(big)
    assert retained_size([beside], stop=[beside.harness]) < 10_000
    assert retained_size([beside]) > 100_000


def test_flat_means_at_most_ten_percent_above_the_first_reading() -> None:
    assert flat(1000, 1000)
    assert flat(1000, 1100)
    assert not flat(1000, 1101)
    assert not flat(1000, 2000)


@given(first=st.integers(1, 10**9), shrink=st.floats(0.0, 1.0))
def test_a_figure_that_ends_lower_is_flat(first: int, shrink: float) -> None:
    assert flat(first, int(first * (1 - shrink)))


def test_a_window_peak_keeps_each_figures_largest_reading() -> None:
    a = MemoryReading(rss=10, extender=5, agents=(1, 9), live_pods=3)
    b = MemoryReading(rss=8, extender=7, agents=(4, 2), live_pods=1)
    assert peak(None, a) == a
    assert peak(a, b) == MemoryReading(rss=10, extender=7, agents=(4, 9), live_pods=1)


def test_a_reading_sizes_the_extender_and_each_agent() -> None:
    world = World(nodes=2, gpus=2)
    reading = read_memory(world)
    assert reading.rss > 0 and reading.extender > 0 and len(reading.agents) == 2
    assert all(a > 0 for a in reading.agents) and reading.live_pods == 0
    assert reading.harness > 0 and reading.blocks > 0


def test_a_soak_reports_every_so_many_pods_then_once_drained() -> None:
    seen: list[Progress] = []
    soak(SoakConfig(pods=60, seed=3), every=20, report=lambda _w, at: seen.append(at))
    marks = [at.submitted for at in seen if not at.drained]
    assert [m // 20 for m in marks] == [1, 2, 3]
    assert all(0 <= m % 20 < 4 for m in marks)  # a gang of up to 4 may step past a mark
    assert [at.drained for at in seen].count(True) == 1 and seen[-1].drained
