"""The change feed: sequence numbers, trimming, and which cluster-state changes mark a node."""

from __future__ import annotations

import pytest

from tests.builders import make_node, make_pod
from vgpu.core.changes import ChangeFeed
from vgpu.core.ids import NodeName
from vgpu.core.ledger import Ledger
from vgpu.core.model import Assignment
from vgpu.core.placement import assignment_for, choose
from vgpu.core.state import ClusterState

N1, N2 = NodeName("n1"), NodeName("n2")


def test_marks_advance_the_sequence_and_since_returns_what_came_after() -> None:
    feed = ChangeFeed()
    assert feed.seq == 0
    assert feed.since(0) == set()
    feed.mark("a")
    feed.mark("b")
    feed.mark("a")
    assert feed.seq == 3
    assert feed.since(0) == {"a", "b"}
    assert feed.since(1) == {"a", "b"}
    assert feed.since(2) == {"a"}
    assert feed.since(3) == set()


def test_since_a_future_sequence_number_is_none() -> None:
    feed = ChangeFeed()
    feed.mark("a")
    assert feed.since(2) is None
    assert feed.since(-1) is None


def test_trimming_past_the_limit_tells_old_readers_to_rebuild() -> None:
    feed = ChangeFeed(limit=4)
    reader_old, names = feed.seq, [f"n{i}" for i in range(5)]
    for name in names[:4]:
        feed.mark(name)
    assert feed.since(reader_old) == set(names[:4])  # at the limit: nothing trimmed yet
    reader_mid = feed.seq
    feed.mark(names[4])  # past the limit: the older half goes
    assert feed.seq == 5
    assert feed.since(reader_old) is None
    assert feed.since(1) is None
    assert feed.since(2) == {"n2", "n3", "n4"}
    assert feed.since(reader_mid) == {"n4"}
    assert feed.since(feed.seq) == set()


def test_sequence_numbers_stay_monotonic_over_many_trims() -> None:
    feed = ChangeFeed(limit=3)
    for i in range(100):
        before = feed.seq
        feed.mark(f"n{i % 7}")
        assert feed.seq == before + 1
        assert feed.since(before) == {f"n{i % 7}"}
        assert len(feed.log) <= 3


@pytest.mark.parametrize("limit", [-5, 0, 1])
def test_limit_below_two_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        ChangeFeed(limit=limit)


def _cluster() -> tuple[ClusterState, Ledger, ChangeFeed, Assignment]:
    feed = ChangeFeed()
    state = ClusterState([make_node("n1", gpus=2), make_node("n2", gpus=2)], feed=feed)
    ns = state.node(N1)
    pod = make_pod("a", 30)
    choice = choose(ns, pod)
    assert choice is not None
    return state, Ledger(state), feed, assignment_for(ns, pod, choice)


def test_building_a_state_marks_its_nodes() -> None:
    _state, _ledger, feed, _a = _cluster()
    assert feed.since(0) == {"n1", "n2"}


def test_charging_and_refunding_mark_only_the_assignments_node() -> None:
    state, ledger, feed, a = _cluster()
    seq = feed.seq
    ledger.assume(a)
    assert feed.since(seq) == {"n1"}
    seq = feed.seq
    ledger.release(a.pod)
    assert feed.since(seq) == {"n1"}
    seq = feed.seq
    state.charge(a)
    assert feed.since(seq) == {"n1"}
    seq = feed.seq
    state.refund(a)
    assert feed.since(seq) == {"n1"}


def test_adding_and_removing_nodes_mark_them() -> None:
    state, _ledger, feed, _a = _cluster()
    seq = feed.seq
    state.add_node(make_node("n3", gpus=1))
    assert feed.since(seq) == {"n3"}
    seq = feed.seq
    state.add_node(make_node("n1", gpus=4))  # new inventory for a known node
    assert feed.since(seq) == {"n1"}
    seq = feed.seq
    state.remove_node(N2)
    assert feed.since(seq) == {"n2"}
    seq = feed.seq
    state.remove_node(NodeName("never-there"))
    assert feed.since(seq) == set()


def test_replacing_a_node_with_holdings_marks_it_and_keeps_the_charge() -> None:
    state, ledger, feed, a = _cluster()
    ledger.assume(a)
    seq = feed.seq
    state.add_node(make_node("n1", gpus=2))
    assert feed.since(seq) == {"n1"}
    assert sorted(state.node(N1).free_cores) == [70, 100]


def test_a_reverted_what_if_marks_the_touched_node() -> None:
    state, ledger, feed, a = _cluster()
    seq = feed.seq
    with state.what_if():
        ledger.assume(a)
    assert state.node(N1).free_cores == [100, 100]
    assert feed.since(seq) == {"n1"}  # conservative: nothing changed in the end, n1 is named


def test_reverting_node_changes_marks_them_again() -> None:
    state, _ledger, feed, _a = _cluster()
    state.fork()
    state.add_node(make_node("n3", gpus=1))
    state.remove_node(N2)
    seq = feed.seq
    state.revert()
    assert feed.since(seq) == {"n2", "n3"}
    assert state.has_node(N2) and not state.has_node(NodeName("n3"))


def test_node_states_from_a_state_without_a_feed_work_unmarked() -> None:
    state = ClusterState([make_node("n1", gpus=2)])
    ledger = Ledger(state)
    ns = state.node(N1)
    assert state.feed is None and ns.feed is None
    pod = make_pod("a", 30)
    choice = choose(ns, pod)
    assert choice is not None
    a = assignment_for(ns, pod, choice)
    with state.what_if():
        ledger.assume(a)
        assert sorted(ns.free_cores) == [70, 100]
    ledger.assume(a)
    state.add_node(make_node("n1", gpus=2))
    state.remove_node(N1)
    assert ledger.release(a.pod) == a
