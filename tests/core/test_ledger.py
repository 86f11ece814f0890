import pytest

from tests.builders import make_node, make_pod
from vgpu.core.errors import Conflict, StateError
from vgpu.core.ids import NodeName
from vgpu.core.ledger import Ledger
from vgpu.core.model import Assignment, Phase, PodRequest
from vgpu.core.placement import assignment_for, choose
from vgpu.core.state import ClusterState, NodeState


def _setup() -> tuple[ClusterState, Ledger, NodeState, PodRequest, Assignment]:
    state = ClusterState([make_node("n1", gpus=2)])
    ledger = Ledger(state)
    ns = state.node(NodeName("n1"))
    pod = make_pod("a", 30)
    choice = choose(ns, pod)
    assert choice is not None
    return state, ledger, ns, pod, assignment_for(ns, pod, choice)


def test_assume_confirm_release_are_idempotent() -> None:
    _state, ledger, ns, pod, a = _setup()
    assert ledger.assume(a) is True
    assert ledger.assume(a) is False  # retried bind: charged once
    assert ns.free_cores == [70, 100]
    assert ledger.confirm(a) is False
    assert ledger.holding(pod.key).phase is Phase.BOUND  # type: ignore[union-attr]
    assert ledger.assume(a) is False  # a late assume never downgrades a bound pod
    assert ledger.holding(pod.key).phase is Phase.BOUND  # type: ignore[union-attr]
    assert ledger.release(pod.key) == a
    assert ledger.release(pod.key) is None
    assert ns.free_cores == [100, 100]
    assert ns.cpu_free == 64_000


def test_a_different_assignment_for_a_held_pod_is_a_conflict() -> None:
    _state, ledger, ns, pod, a = _setup()
    ledger.assume(a)
    other = assignment_for(ns, pod, ((1,),))
    with pytest.raises(Conflict, match="different assignment"):
        ledger.assume(other)
    assert ns.free_cores == [70, 100]


def test_overcommit_is_refused_not_silently_charged() -> None:
    _state, ledger, ns, _, _ = _setup()
    big = make_pod("big", 80)
    a1 = assignment_for(ns, big, ((0,),))
    a2 = assignment_for(ns, make_pod("big2", 80), ((0,),))
    ledger.assume(a1)
    with pytest.raises(Conflict, match="GPU 0: 20 cores"):
        ledger.assume(a2)
    assert ns.free_cores == [20, 100]


def test_rebuild_reports_what_does_not_fit_and_keeps_the_rest() -> None:
    _state, ledger, ns, _, _ = _setup()
    first = assignment_for(ns, make_pod("x", 80), ((0,),))
    second = assignment_for(ns, make_pod("y", 80), ((0,),))
    third = assignment_for(ns, make_pod("z", 50), ((1,),))
    rejected = ledger.rebuild([first, second, third])
    assert [r.assignment.pod for r in rejected] == ["default/y"]
    assert ns.free_cores == [20, 50]


def test_reservations_expire_by_deadline() -> None:
    _state, ledger, _ns, pod, a = _setup()
    ledger.reserve(a, deadline=100.0)
    assert ledger.expired(99.0) == []
    assert [h.assignment.pod for h in ledger.expired(100.0)] == [pod.key]


def test_fork_revert_restores_capacity_and_holdings() -> None:
    state, ledger, ns, pod, a = _setup()
    state.fork()
    ledger.assume(a)
    state.fork()
    ledger.release(pod.key)
    state.revert()
    assert ns.free_cores == [70, 100]
    state.revert()
    assert ns.free_cores == [100, 100]
    assert ledger.holding(pod.key) is None
    with pytest.raises(StateError):
        state.revert()


def test_fork_commit_keeps_changes() -> None:
    state, ledger, ns, _pod, a = _setup()
    state.fork()
    ledger.assume(a)
    state.commit()
    assert ns.free_cores == [70, 100]
    assert not state.forked
