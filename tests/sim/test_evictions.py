"""`Evictions` answers as a fresh fork per question would (evict the whole list, select on the
nodes they left, revert), for lists that grow, shrink or change anywhere, and leaves the cluster as
it found it."""

from __future__ import annotations

from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.ids import PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import PodRequest
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import Workload
from vgpu.sim.evictions import Evictions

SIZES = (10, 25, 50, 100)


def _cluster(sizes: list[int]) -> tuple[Ledger, Scheduler, list[PodKey]]:
    """Three 2-GPU nodes filled with pods of `sizes` cores while they fit."""
    state = ClusterState([make_node(n, gpus=2, cpu=64_000) for n in "xyz"])
    ledger = Ledger(state)
    scheduler = Scheduler(state, make_policy("bestfit", Workload((), ())), rng=Random(1))
    placed = []
    for i, cores in enumerate(sizes):
        pod = make_pod(f"r{i}", cores)
        got = scheduler.select(pod)
        if got is not None:
            ledger.confirm(got.assignment)
            placed.append(pod.key)
    return ledger, scheduler, placed


def _fresh(ledger: Ledger, scheduler: Scheduler, pod: PodRequest, gone: list[PodKey]) -> bool:
    with ledger.state.what_if():
        nodes = {a.node for k in gone if (a := ledger.release(k)) is not None}
        return scheduler.select(pod, sorted(nodes)) is not None


def _free(ledger: Ledger) -> list[tuple[str, list[int], list[int]]]:
    return [(ns.name, list(ns.free_cores), list(ns.free_mem)) for ns in ledger.state.nodes()]


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.sampled_from(SIZES), min_size=4, max_size=24),
    asks=st.lists(
        st.tuples(st.sampled_from((50, 100, 200)), st.lists(st.integers(0, 23)), st.booleans()),
        max_size=16,
    ),
)
def test_each_answer_is_that_of_a_fresh_fork_and_the_cluster_is_left_as_found(
    sizes: list[int], asks: list[tuple[int, list[int], bool]]
) -> None:
    ledger, scheduler, placed = _cluster(sizes)
    twin, twin_scheduler, _ = _cluster(sizes)  # asked afresh each time
    before = _free(ledger)
    gone: list[PodKey] = []
    pods = {
        c: make_pod(f"w{c}", c) for c in (50, 100, 200)
    }  # asked again and again, as reclaim does
    with Evictions(ledger, scheduler) as what_if:
        for cores, picks, grow in asks:
            more = [placed[i % len(placed)] for i in picks]
            gone = list(dict.fromkeys([*gone, *more[:1]] if grow else more))
            pod = pods[cores]
            assert what_if.fits(pod, gone) == _fresh(twin, twin_scheduler, pod, gone)
    assert _free(ledger) == before == _free(twin)
    assert sorted(ledger.state.holdings) == sorted(placed)


def test_a_growing_list_evicts_only_the_new_victims() -> None:
    ledger, scheduler, placed = _cluster([50, 50, 50, 50, 100, 100])
    what_if = Evictions(ledger, scheduler)
    whole = make_pod("w", 100)
    assert not what_if.fits(whole, placed[:1])
    assert what_if.fits(whole, placed[:2])  # the two halves of one GPU
    assert len(ledger.state._marks) == 2
    assert not what_if.fits(whole, placed[1:2])
    assert len(ledger.state._marks) == 1
    what_if.close()
    assert not ledger.state.forked
