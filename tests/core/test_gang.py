from tests.builders import make_node, make_pod
from vgpu.core.gang import GangFailure, GangPlan, plan, release, reserve
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import Phase
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import Workload

GANG = GangKey("default/tfjob")


def _cluster(*gpus: int) -> tuple[ClusterState, Ledger, Scheduler]:
    state = ClusterState([make_node(f"n{i}", gpus=g) for i, g in enumerate(gpus)])
    return state, Ledger(state), Scheduler(state, make_policy("binpack", Workload((), ())))


def _tfjob(workers: int = 4):  # type: ignore[no-untyped-def]
    return [make_pod("ps", cpu=2000)] + [make_pod(f"worker-{i}", 100) for i in range(workers)]


def test_full_fit_returns_a_plan_and_changes_nothing() -> None:
    state, ledger, sched = _cluster(2, 2)
    result = plan(sched, GANG, _tfjob())
    assert isinstance(result, GangPlan)
    assert len(result.assignments) == 5
    gpus = [s.uuid for a in result.assignments for s in a.shares]
    assert len(gpus) == len(set(gpus)) == 4
    assert all(f == 100 for ns in state.nodes() for f in ns.free_cores)
    assert ledger.holdings() == []


def test_partial_fit_places_nothing_and_says_what_is_missing() -> None:
    state, _ledger, sched = _cluster(2, 1)
    result = plan(sched, GANG, _tfjob())
    assert isinstance(result, GangFailure)
    assert result.placed == 3 and result.total == 5
    assert "worker" in result.blocked
    assert "gpu-busy" in result.reason
    assert all(f == 100 for ns in state.nodes() for f in ns.free_cores)


def test_reserve_is_all_or_nothing_and_release_is_idempotent() -> None:
    state, ledger, sched = _cluster(2, 2)
    result = plan(sched, GANG, _tfjob())
    assert isinstance(result, GangPlan)
    reserve(ledger, result, deadline=60.0)
    assert {h.phase for h in ledger.holdings()} == {Phase.RESERVED}
    assert sum(f for ns in state.nodes() for f in ns.free_cores) == 0
    # A second gang cannot get a half: it fails whole while the first holds its places.
    other = plan(sched, GangKey("default/other"), _tfjob(1))
    assert isinstance(other, GangFailure)
    assert len(release(ledger, GANG)) == 5
    assert release(ledger, GANG) == []
    assert sum(f for ns in state.nodes() for f in ns.free_cores) == 400


def test_gang_members_fill_big_asks_first() -> None:
    _state, _ledger, sched = _cluster(4)
    members = [make_pod("small", 50), make_pod("big", 300)]
    result = plan(sched, GANG, members)
    assert isinstance(result, GangPlan)
    assert [a.pod for a in result.assignments] == ["default/small", "default/big"]


def test_each_member_is_placed_only_on_the_nodes_allowed_gives_it() -> None:
    """binpack puts both workers on n0 unless told otherwise; worker-1 may use n1 only."""
    state, _ledger, sched = _cluster(2, 2)
    workers = _tfjob(2)[1:]
    alone = plan(sched, GANG, workers)
    assert isinstance(alone, GangPlan)
    assert {a.node for a in alone.assignments} == {"n0"}
    result = plan(sched, GANG, workers, allowed={PodKey("default/worker-1"): [NodeName("n1")]})
    assert isinstance(result, GangPlan)
    assert {a.pod: a.node for a in result.assignments} == {
        "default/worker-0": "n0",
        "default/worker-1": "n1",
    }
    assert all(f == 100 for ns in state.nodes() for f in ns.free_cores)


def test_a_member_no_node_is_allowed_for_fails_the_gang_and_says_so() -> None:
    _state, ledger, sched = _cluster(2, 2)
    workers = _tfjob(2)[1:]
    result = plan(sched, GANG, workers, allowed={PodKey("default/worker-1"): []})
    assert isinstance(result, GangFailure)
    assert result.blocked == "default/worker-1"
    assert "2 node(s) ruled out by its node constraints" in result.reason
    assert ledger.holdings() == []
