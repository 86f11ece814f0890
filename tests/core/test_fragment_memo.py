"""The fragmentation meter's memo is bounded by size, not by the node states ever met.

The long soak (`bench/handoff_soak.py`: 3 nodes x 8 GPUs, 100,000 pods) showed the extender's
state growing by about 0.6 KB per new node state: the meter memoised every (CPU level, free-GPU
multiset) it was asked about, and a long-lived extender meets a new multiset with nearly every
pod it places."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node
from vgpu.core.fragmentation import MEMO_LIMIT, FragmentMeter, GpuKey
from vgpu.core.workload import TaskShape, Workload

WORKLOAD = Workload(
    (TaskShape(1000, 25, 1), TaskShape(2000, 50, 1, 4096), TaskShape(4000, 100, 2)),
    (0.5, 0.3, 0.2),
)
GPUS = 8
MMIB = 16384 * 1000


def _key(meter: FragmentMeter, i: int) -> tuple[GpuKey, ...]:
    """The `i`-th free-GPU multiset of an 8-GPU node: one partly used GPU (its free cores and
    memory make `i`, so no two `i` alike), seven idle."""
    cid = meter.gpu_class(make_node(gpus=1).gpus[0])
    used = (cid, i % 101, (i // 101) * 1000)
    return tuple(sorted([used, *[(cid, 100, MMIB)] * (GPUS - 1)]))


def test_the_meter_memo_stays_bounded_over_many_distinct_node_states() -> None:
    meter = FragmentMeter(WORKLOAD)
    for i in range(MEMO_LIMIT + 5_000):  # each a key of its own
        meter.of_key(3, _key(meter, i))
    assert meter.memo_size() <= MEMO_LIMIT <= 16_384


@settings(max_examples=30, deadline=None)
@given(keys=st.lists(st.integers(0, 10**6), min_size=1, max_size=40))
def test_a_bounded_memo_answers_as_a_fresh_meter_does(keys: list[int]) -> None:
    small = FragmentMeter(WORKLOAD, memo_limit=3)  # cleared often
    for i in keys + keys:
        fresh = FragmentMeter(WORKLOAD)
        assert small.of_key(3, _key(small, i)) == fresh.of_key(3, _key(fresh, i))
    assert small.memo_size() <= 3
