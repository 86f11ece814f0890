from random import Random

import pytest

from tests.builders import make_node, make_pod
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import NodeName
from vgpu.core.ledger import Ledger
from vgpu.core.placement import assignment_for, choose
from vgpu.core.policy.specs import POLICY_NAMES, make_policy
from vgpu.core.scheduler import Scheduler, scale_score
from vgpu.core.state import ClusterState
from vgpu.core.workload import TaskShape, Workload, workload_from


def test_whole_gpus_prefer_an_nvlink_pair_then_low_indices() -> None:
    node = make_node("n1", gpus=4, nvlink=((1, 3),))
    ns = ClusterState([node]).node(NodeName("n1"))
    assert choose(ns, make_pod("a", 200)) == ((1, 3),)
    plain = ClusterState([make_node("n2", gpus=4)]).node(NodeName("n2"))
    assert choose(plain, make_pod("a", 200)) == ((0, 1),)


def test_whole_gpus_prefer_one_numa_node() -> None:
    node = make_node("n1", gpus=4, numa=(0, 1, 0, 1))
    ns = ClusterState([node]).node(NodeName("n1"))
    assert choose(ns, make_pod("a", 200)) == ((0, 2),)


def test_multi_container_pod_is_placed_container_by_container() -> None:
    ns = ClusterState([make_node("n1", gpus=2)]).node(NodeName("n1"))
    choice = choose(ns, make_pod("a", 60, 60, 30))
    assert choice is not None
    assert choice[0] != choice[1]  # two 60s cannot share a GPU
    assert ns.free_cores == [100, 100]  # choosing leaves the node untouched
    assert choose(ns, make_pod("b", 60, 60, 90)) is None


def _two_nodes(policy_name: str) -> tuple[Scheduler, Ledger]:
    state = ClusterState([make_node("n1", gpus=2), make_node("n2", gpus=2)])
    ledger = Ledger(state)
    sched = Scheduler(state, make_policy(policy_name, Workload((TaskShape(1000, 50, 1),), (1.0,))))
    ns = state.node(NodeName("n1"))
    ledger.assume(assignment_for(ns, make_pod("seed", 40), ((0,),)))
    return sched, ledger


def test_binpack_fills_the_used_gpu_and_node() -> None:
    sched, _ = _two_nodes("binpack")
    sel = sched.select(make_pod("p", 50))
    assert sel is not None and sel.node == "n1" and sel.choice == ((0,),)


def test_spread_picks_the_emptiest_node() -> None:
    sched, _ = _two_nodes("spread")
    sel = sched.select(make_pod("p", 50))
    assert sel is not None and sel.node == "n2"


def test_fgd_keeps_a_gpu_whole_for_the_expected_workload() -> None:
    # Expected tasks ask 50 cores: putting 20 beside the 40 leaves 40 (useless to a 50) only on
    # one GPU, while a fresh GPU would strand 80 → FGD packs onto the used GPU.
    state = ClusterState([make_node("n1", gpus=2)])
    ledger = Ledger(state)
    ns = state.node(NodeName("n1"))
    ledger.assume(assignment_for(ns, make_pod("seed", 40), ((0,),)))
    sched = Scheduler(state, make_policy("fgd", Workload((TaskShape(1000, 50, 1),), (1.0,))))
    sel = sched.select(make_pod("p", 10))
    assert sel is not None and sel.choice == ((0,),)
    sel = sched.select(make_pod("q", 60))
    assert sel is not None and sel.choice == ((0,),)


def test_scores_scale_to_0_10_and_nodes_that_do_not_fit_get_0() -> None:
    assert [scale_score(s, (2.0, 6.0)) for s in (2.0, 3.0, 6.0, None)] == [0, 2, 10, 0]
    assert scale_score(4.0, (4.0, 4.0)) == 10 and scale_score(4.0, None) == 0


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_every_policy_places_and_never_overcommits(name: str) -> None:
    nodes = [make_node(f"n{i}", gpus=2) for i in range(3)]
    state = ClusterState(nodes)
    ledger = Ledger(state)
    pods = [make_pod(f"p{i}", c) for i, c in enumerate([30, 100, 50, 70, 200, 20, 90, 40, 0])]
    sched = Scheduler(state, make_policy(name, workload_from(pods)), rng=Random(1))
    for pod in pods:
        sel = sched.select(pod)
        if sel is not None:
            ledger.assume(assignment_for(state.node(sel.node), pod, sel.choice))
    for ns in state.nodes():
        assert all(0 <= f <= 100 for f in ns.free_cores)
        assert all(0 <= f <= t for f, t in zip(ns.free_mem, ns.total_mem, strict=True))
    assert len(ledger.holdings()) >= 6


def test_unknown_policy_is_a_clear_error() -> None:
    with pytest.raises(InvalidRequest, match="choose one of"):
        make_policy("tetris", Workload((), ()))
