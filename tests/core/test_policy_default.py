"""The default policy: each term it adds to FGD changes a decision FGD gets wrong (or ties)."""

import pytest

from tests.builders import make_node, make_pod
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import NodeName
from vgpu.core.learning import WorkloadLearner, distance
from vgpu.core.ledger import Ledger
from vgpu.core.model import GpuSelector, PodRequest
from vgpu.core.placement import assignment_for
from vgpu.core.policy.default import DefaultPolicy
from vgpu.core.policy.knobs import DefaultConfig
from vgpu.core.policy.specs import make_policy, parse_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import DEFAULT_WORKLOAD, TaskShape, Workload

ONE_GPU = Workload((TaskShape(10_000, 100, 1),), (1.0,))
EIGHT_AND_ONE = Workload((TaskShape(1000, 100, 8), TaskShape(1000, 100, 1)), (0.5, 0.5))


def _hold(
    state: ClusterState, node: str, pod: PodRequest, choice: tuple[tuple[int, ...], ...]
) -> None:
    Ledger(state).assume(assignment_for(state.node(NodeName(node)), pod, choice))


def _pick(
    state: ClusterState,
    policy_name: str,
    workload: Workload,
    pod: PodRequest,
    *,
    warm: bool = False,
) -> str:
    sched = Scheduler(state, make_policy(policy_name, workload))
    if warm:  # a first pod lets the policy count the GPU models it scores (`core.model_demand`)
        sched.select(make_pod("warm-up", cpu=1))
    sel = sched.select(pod)
    assert sel is not None
    return str(sel.node)


def test_cpu_stranding_sends_cpu_only_pods_where_cpu_is_spare() -> None:
    # Same GPUs; "tight" has just the CPU its 4 GPUs need at 10 vCPU each, "roomy" twice that.
    # FGD sees no change in fragmentation on either node and takes the first: "tight".
    state = ClusterState(
        [make_node("tight", gpus=4, cpu=44_000), make_node("roomy", gpus=4, cpu=88_000)]
    )
    pod = make_pod("cpu-only", cpu=12_000)
    assert _pick(state, "fgd", ONE_GPU, pod) == "tight"
    assert _pick(state, "default:online=0", ONE_GPU, pod) == "roomy"
    assert _pick(state, "default:online=0,cpu_weight=0", ONE_GPU, pod) == "tight"


def test_equal_growth_goes_to_the_first_node_or_with_tie_packed_the_fullest() -> None:
    # Neither 8-GPU node can take an 8-GPU task any more; taking one of their idle GPUs grows
    # fragmentation equally. FGD takes node order ("b7", 7 idle); default packs "a6" (6 idle),
    # keeping the emptier node closer to whole; the idle node "c8" is the worst for both.
    nodes = [make_node(n, gpus=8, cpu=96_000) for n in ("b7", "a6", "c8")]
    state = ClusterState(nodes)
    _hold(state, "b7", make_pod("x", 100), ((0,),))
    _hold(state, "a6", make_pod("y", 200), ((0, 1),))
    pod = make_pod("one", 100)
    assert _pick(state, "fgd", EIGHT_AND_ONE, pod) == "b7"
    assert _pick(state, "default:online=0,tie=packed", EIGHT_AND_ONE, pod) == "a6"
    assert _pick(state, "default:online=0", EIGHT_AND_ONE, pod) == "b7"  # the default: order


def test_residue_prefers_the_gpu_a_share_fills_exactly() -> None:
    # Expected shares are 40 cores. A 30 on the idle GPU of "half" leaves 70 (one 40 and 30
    # unusable); on the 70-free GPU of "light" it leaves exactly 40. FGD sees both fit a 40 (no
    # growth) and takes node order; residue-aware default fills the 70.
    state = ClusterState([make_node("half", gpus=2), make_node("light", gpus=2)])
    _hold(state, "half", make_pod("x", 100), ((1,),))
    _hold(state, "light", make_pod("y", 30), ((0,),))
    shares = Workload((TaskShape(1000, 40, 1),), (1.0,))
    pod = make_pod("p", 30)
    assert _pick(state, "fgd", shares, pod) == "half"
    sel = Scheduler(state, make_policy("default:online=0", shares)).select(pod)
    assert sel is not None and sel.node == "light" and sel.choice == ((0,),)
    assert _pick(state, "default:online=0,residue_weight=0", shares, pod) == "half"


def test_an_empty_workload_still_places_and_learning_starts_from_observed_pods() -> None:
    state = ClusterState([make_node(f"n{i}", gpus=4) for i in range(3)])
    policy = make_policy("default", Workload((), ()))
    assert isinstance(policy, DefaultPolicy) and policy.learner is not None
    sched = Scheduler(state, policy)
    ledger = Ledger(state)
    for i in range(20):
        pod = make_pod(f"p{i}", 50)
        sel = sched.select(pod)
        assert sel is not None
        ledger.assume(assignment_for(state.node(sel.node), pod, sel.choice))
    assert policy.generation == 1  # rebuilt once, after 16 observations
    assert policy.meter.workload.shapes == (TaskShape(1000, 50, 1),)
    assert sum(f for ns in state.nodes() for f in ns.free_cores) == 1200 - 20 * 50


def test_learner_counts_each_pod_once_and_tracks_drift() -> None:
    learner = WorkloadLearner(window=64, refresh=64)
    for _ in range(3):
        learner.observe(make_pod("same", 50))
    assert learner.observed == 1
    for i in range(200):
        learner.observe(make_pod(f"a{i}", 50))
    assert learner.workload.shapes == (TaskShape(1000, 50, 1),)
    for i in range(200):
        learner.observe(make_pod(f"b{i}", 100))
    assert learner.workload.shapes == (TaskShape(1000, 100, 1),)  # the window forgot the 50s


def test_a_prior_counts_until_observations_outweigh_it() -> None:
    learner = WorkloadLearner(ONE_GPU, prior_weight=100)
    assert learner.workload == ONE_GPU
    for i in range(16):
        learner.observe(make_pod(f"s{i}", 30))
    assert learner.workload == ONE_GPU  # 16 pods against a prior of 100: within sampling noise
    for i in range(16, 144):
        learner.observe(make_pod(f"s{i}", 30))
    assert set(learner.workload.shapes) == {TaskShape(10_000, 100, 1), TaskShape(1000, 30, 1)}
    assert distance(learner.workload, ONE_GPU) == pytest.approx(144 / 244)


def test_policy_specs_parse_and_bad_ones_are_clear_errors() -> None:
    assert DefaultConfig.parse("cpu_weight=0.5,tie=order,online=0") == DefaultConfig(
        cpu_weight=0.5, tie="order", online=False
    )
    assert parse_policy("default:band=40").config == DefaultConfig(band=40)
    with pytest.raises(InvalidRequest, match="unknown policy 'fgd:x=1'"):
        parse_policy("fgd:x=1")
    assert parse_policy("default").learns_online
    assert not parse_policy("default:online=0").learns_online
    assert not parse_policy("fgd").learns_online
    with pytest.raises(InvalidRequest, match="bad default-policy option"):
        make_policy("default:speed=11", Workload((), ()))
    with pytest.raises(InvalidRequest, match="not a number"):
        make_policy("default:cpu_weight=lots", Workload((), ()))
    with pytest.raises(InvalidRequest, match="tie"):
        make_policy("default:tie=random", Workload((), ()))


def test_schedulers_sharing_a_state_never_reuse_each_others_evaluations() -> None:
    # Node caches live on the shared state; each scheduler and policy must key its own entries.
    state = ClusterState([make_node("a", gpus=2), make_node("b", gpus=2)])
    _hold(state, "a", make_pod("x", 60), ((0,),))
    pod = make_pod("p", 30)
    assert _pick(state, "binpack", Workload((), ()), pod) == "a"
    assert _pick(state, "spread", Workload((), ()), pod) == "b"


def test_nodes_in_the_same_state_share_an_evaluation_but_not_across_topologies() -> None:
    plain = make_node("plain", gpus=4)
    linked = make_node("linked", gpus=4, nvlink=((2, 3),))
    twin = make_node("twin", gpus=4)
    state = ClusterState([plain, linked, twin])
    policy = make_policy("default:online=0", EIGHT_AND_ONE)
    assert isinstance(policy, DefaultPolicy)
    pod = make_pod("two", 200)
    sched = Scheduler(state, policy)
    got = {n: sched.evaluate(state.node(NodeName(n)), pod) for n in ("plain", "linked", "twin")}
    assert got["plain"] is got["twin"]  # one evaluation served both identical nodes
    assert got["plain"] is not None and got["plain"].choice == ((0, 1),)
    assert got["linked"] is not None and got["linked"].choice == ((2, 3),)


def test_cpu_stranding_does_not_pull_free_pods_onto_gpus_that_typed_pods_need() -> None:
    # Half the expected pods may only run on P100. "p100" is CPU-poor (12 vCPU for 2 GPUs), so
    # stranding blind to types sees its GPUs stranded and pulls a CPU-light 0.8 share there,
    # against FGD's measure; counted only where no type-constrained shape may run, it leaves
    # the P100 to the pods that need it and the share goes to the "plain" node.
    p100_only = GpuSelector(include_models=("P100",))
    workload = Workload(
        (TaskShape(10_000, 100, 1), TaskShape(4_000, 50, 1, None, p100_only)), (0.5, 0.5)
    )
    state = ClusterState(
        [
            make_node("p100", gpus=2, model="P100", cpu=12_000),
            make_node("plain", gpus=8, model="G2", cpu=96_000),
        ]
    )
    pod = make_pod("share", 80, cpu=1000)
    assert _pick(state, "fgd", workload, pod) == "plain"
    assert _pick(state, "default:online=0,typed=0", workload, pod) == "p100"
    assert _pick(state, "default:online=0", workload, pod, warm=True) == "plain"


def test_a_pod_naming_a_gpu_by_uuid_is_placed_on_a_node_in_the_same_state_as_another() -> None:
    """The memo of nodes in the same state told a pod naming a GPU of node b that b had no room,
    because node a, in the same state, had none of the GPUs it names."""
    state = ClusterState([make_node("a", gpus=2), make_node("b", gpus=2)])
    scheduler = Scheduler(state, make_policy("default", DEFAULT_WORKLOAD))
    there = state.node(NodeName("b")).gpus[1].uuid
    pod = make_pod("p", 25, selector=GpuSelector(include_uuids=frozenset({there})))
    chosen = scheduler.select(pod)
    assert chosen is not None
    assert [s.uuid for s in chosen.assignment.shares] == [there]
