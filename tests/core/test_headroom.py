"""`fits_nowhere` is a necessary condition only: whenever it says no node can take a pod, the
scheduler agrees, whatever the policy, the cluster's fill, its models, sizes and unhealthy GPUs
(a wrong True would keep a pod held that fits). And it does answer the pass's costly case: a
pod asking a model no node has, or more than any node has free."""

from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.headroom import fits_nowhere, headroom
from vgpu.core.ledger import Ledger
from vgpu.core.model import GpuSelector, PodRequest
from vgpu.core.placement import assignment_for
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.units import MMIB_PER_MIB
from vgpu.core.workload import workload_from

cores = st.sampled_from([5, 10, 25, 30, 47, 50, 81, 99, 100, 200, 300, 400])
memory = st.one_of(st.none(), st.integers(min_value=256, max_value=40_000))
selectors = st.sampled_from(
    [GpuSelector(), GpuSelector(("A100",)), GpuSelector(("H100",)), GpuSelector((), ("A100",))]
)
pod_specs = st.tuples(
    st.lists(st.tuples(cores, memory), min_size=0, max_size=3),
    st.integers(min_value=0, max_value=80_000),
    st.integers(min_value=0, max_value=300_000),
    selectors,
)
policies = st.sampled_from(["binpack", "spread", "fgd", "default", "bestfit", "gpupacking"])


def _cluster(unhealthy: tuple[int, ...]) -> ClusterState:
    return ClusterState(
        [
            make_node("a", gpus=2, memory_mib=16384, unhealthy=unhealthy),
            make_node("b", gpus=4, model="H100", memory_mib=81920, cpu=32_000),
            make_node("c", gpus=3, model="A100", memory_mib=40960, mem=64_000),
        ]
    )


def _pod(name: str, spec: tuple[list[tuple[int, int | None]], int, int, GpuSelector]) -> PodRequest:
    containers, cpu, mem, selector = spec
    pod = make_pod(name, *(c for c, _ in containers), cpu=cpu, mem=mem, selector=selector)
    shaped = tuple(
        type(c)(c.name, c.cores, None if c.cores >= 100 else m)
        for c, (_, m) in zip(pod.containers, containers, strict=True)
    )
    return PodRequest(pod.key, pod.cpu_milli, pod.memory_mib, shaped, pod.selector)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(pod_specs, max_size=12),
    pod_specs,
    policies,
    st.sampled_from([(), (0,), (0, 1)]),
    st.integers(0, 5),
    st.data(),
)
def test_a_pod_said_to_fit_nowhere_is_placed_nowhere(  # type: ignore[no-untyped-def]
    placed, probe, policy, unhealthy, seed, data
) -> None:
    state = _cluster(unhealthy)
    ledger = Ledger(state)
    earlier = [_pod(f"p{i}", s) for i, s in enumerate(placed)]
    sched = Scheduler(state, make_policy(policy, workload_from(earlier)), rng=Random(seed))
    headroom(state.nodes())  # each node's summary memoised, then changed by the placements
    for pod in earlier:
        sel = sched.select(pod)
        if sel is not None:
            ledger.assume(assignment_for(state.node(sel.node), pod, sel.choice))
    room = headroom(state.nodes())
    for ns in state.nodes():
        ns.cache.clear()
    assert headroom(state.nodes()) == room, "a node's memoised summary outlived a change"
    for pod in [_pod("probe", probe), *_at_the_edge(state, data)]:
        if fits_nowhere(room, pod):
            assert sched.select(pod) is None, pod


def _at_the_edge(state: ClusterState, data: st.DataObject) -> list[PodRequest]:
    """Pods asking exactly what one node or GPU has free, or one unit more (the bounds' edges)."""
    ns = data.draw(st.sampled_from(list(state.nodes())))
    pos = data.draw(st.integers(0, len(ns.gpus) - 1))
    d = data.draw(st.sampled_from([0, 1]))
    cpu, mem = ns.cpu_free + data.draw(st.sampled_from([0, 1])), ns.mem_free + d
    free = ns.free_cores[pos]
    out = []
    if free + d > 0:  # a share: at most 99 cores (100 or more asks whole GPUs)
        need = ns.free_mem[pos] // MMIB_PER_MIB + data.draw(st.sampled_from([0, 1]))
        share = min(free + d, 99)
        out.append(make_pod("share", share, memory_mib=max(need, 1), cpu=cpu, mem=mem))
    idle = sum(1 for p in range(len(ns.gpus)) if ns.gpus[p].healthy and ns.is_idle_gpu(p))
    if idle + d:
        out.append(make_pod("whole", 100 * (idle + d), cpu=cpu, mem=mem))
    return out


def test_a_model_no_node_has_or_more_than_any_node_has_fits_nowhere() -> None:
    state = _cluster(())
    room = headroom(state.nodes())
    assert fits_nowhere(room, make_pod("h200", 10, selector=GpuSelector(("H200",))))
    assert fits_nowhere(room, make_pod("five", 500))  # no node has five GPUs
    assert fits_nowhere(room, make_pod("cpu", 10, cpu=100_000))
    assert not fits_nowhere(room, make_pod("share", 30))
    assert not fits_nowhere(room, make_pod("four", 400, selector=GpuSelector(("H100",))))
    broken = ClusterState([make_node("a", gpus=2, unhealthy=(0, 1))])
    assert fits_nowhere(headroom(broken.nodes()), make_pod("share", 10)), "unhealthy GPUs"
