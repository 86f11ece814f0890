"""Property tests on the core: capacity is never overdrawn and what-if planning leaves no trace."""

from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.errors import Conflict
from vgpu.core.gang import GangPlan, plan
from vgpu.core.ids import GangKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import PodRequest
from vgpu.core.placement import assignment_for
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import workload_from

cores = st.sampled_from([0, 5, 10, 25, 30, 47, 50, 81, 99, 100, 200, 400])
memory = st.one_of(st.none(), st.integers(min_value=256, max_value=20_000))
pods = st.lists(
    st.tuples(cores, memory, st.integers(min_value=0, max_value=40_000)), min_size=1, max_size=25
)
policies = st.sampled_from(["binpack", "spread", "fgd", "default", "bestfit", "gpupacking"])


def _cluster() -> ClusterState:
    return ClusterState(
        [
            make_node("a", gpus=2, memory_mib=16384),
            make_node("b", gpus=4, memory_mib=24576, cpu=32_000),
            make_node("c", gpus=1, memory_mib=81920, unhealthy=()),
        ]
    )


def _pods(spec: list[tuple[int, int | None, int]]) -> list[PodRequest]:
    out = []
    for i, (c, m, cpu) in enumerate(spec):
        mem = None if c == 0 or c >= 100 else m
        out.append(make_pod(f"p{i}", *([c] if c else []), memory_mib=mem, cpu=cpu))
    return out


def _snapshot(state: ClusterState) -> object:
    return (
        [
            (ns.cpu_free, ns.mem_free, list(ns.free_cores), list(ns.free_mem))
            for ns in state.nodes()
        ],
        dict(state.holdings),
    )


def _check_capacity(state: ClusterState) -> None:
    held: dict[str, list[int]] = {}
    for h in state.holdings.values():
        for s in h.assignment.shares:
            acc = held.setdefault(s.uuid, [0, 0])
            acc[0] += s.cores
            acc[1] += s.memory_mmib
    for node in {h.assignment.node for h in state.holdings.values()} | {
        ns.name for ns in state.nodes()
    }:  # the per-node index agrees with the holdings
        scan = [h for h in state.holdings.values() if h.assignment.node == node]
        assert sorted(state.holdings_on(node), key=str) == sorted(scan, key=str)
    for ns in state.nodes():
        assert ns.cpu_free >= 0 and ns.mem_free >= 0
        for pos, gpu in enumerate(ns.gpus):
            cores_held, mem_held = held.get(gpu.uuid, [0, 0])
            assert 0 <= ns.free_cores[pos] == 100 - cores_held
            assert 0 <= ns.free_mem[pos] == ns.total_mem[pos] - mem_held


@settings(max_examples=60, deadline=None)
@given(pods, policies, st.integers(min_value=0, max_value=10))
def test_no_gpu_is_ever_overallocated(spec, policy, seed) -> None:  # type: ignore[no-untyped-def]
    state = _cluster()
    ledger = Ledger(state)
    requests = _pods(spec)
    sched = Scheduler(state, make_policy(policy, workload_from(requests)), rng=Random(seed))
    rng = Random(seed)
    for pod in requests:
        sel = sched.select(pod)
        if sel is not None:
            ledger.assume(assignment_for(state.node(sel.node), pod, sel.choice))
        elif state.holdings and rng.random() < 0.3:
            ledger.release(rng.choice(list(state.holdings)))
        _check_capacity(state)


@settings(max_examples=60, deadline=None)
@given(pods)
def test_release_after_assume_restores_state_exactly(spec) -> None:  # type: ignore[no-untyped-def]
    state = _cluster()
    ledger = Ledger(state)
    sched = Scheduler(state, make_policy("binpack", workload_from([])))
    before = _snapshot(state)
    placed = []
    for pod in _pods(spec):
        sel = sched.select(pod)
        if sel is not None:
            ledger.assume(assignment_for(state.node(sel.node), pod, sel.choice))
            placed.append(pod.key)
    for key in reversed(placed):
        ledger.release(key)
    assert _snapshot(state) == before


@settings(max_examples=60, deadline=None)
@given(pods, pods)
def test_fork_revert_leaves_no_trace(first, second) -> None:  # type: ignore[no-untyped-def]
    state = _cluster()
    ledger = Ledger(state)
    sched = Scheduler(state, make_policy("spread", workload_from([])))
    for pod in _pods(first):
        sel = sched.select(pod)
        if sel is not None:
            ledger.assume(assignment_for(state.node(sel.node), pod, sel.choice))
    before = _snapshot(state)
    state.fork()
    for pod in _pods(second):
        sel = sched.select(pod)
        if sel is not None:
            try:
                ledger.confirm(assignment_for(state.node(sel.node), pod, sel.choice))
            except Conflict:
                ledger.release(pod.key)
    for key in list(state.holdings)[:3]:
        ledger.release(key)
    state.revert()
    assert _snapshot(state) == before
    _check_capacity(state)


@settings(max_examples=60, deadline=None)
@given(pods)
def test_gang_plan_is_all_or_nothing(spec) -> None:  # type: ignore[no-untyped-def]
    state = _cluster()
    sched = Scheduler(state, make_policy("binpack", workload_from([])))
    members = _pods(spec)
    before = _snapshot(state)
    result = plan(sched, GangKey("ns/g"), members)
    assert _snapshot(state) == before
    if isinstance(result, GangPlan):
        assert [a.pod for a in result.assignments] == [m.key for m in members]
        ledger = Ledger(state)
        for a in result.assignments:
            ledger.assume(a)  # the plan is jointly chargeable: raises if it overcommits
        _check_capacity(state)
    else:
        assert result.placed < result.total == len(members)
