"""Whether a shape unfit at the last pass may fit now (`Offers.may_fit`) is `Scheduler.select`'s
answer over the nodes pods left, for every policy, though nodes where a one-share pod has no GPU
with its cores and memory free are not evaluated (no policy places it there)."""

from __future__ import annotations

from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.ids import NodeName
from vgpu.core.model import GpuSelector
from vgpu.core.policy.specs import POLICY_NAMES, make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import DEFAULT_WORKLOAD
from vgpu.sim.offers import Offers
from vgpu.sim.poisson import Arrival

NODES = (
    make_node("a", gpus=4, cpu=16_000),
    make_node("b", gpus=2, model="V100", memory_mib=32768, cpu=8_000),
    make_node("c", gpus=2, model="T4", cpu=4_000),
)
GPUS = 8
POD_CORES = (10, 25, 50, 75, 100, 200)
POD_MEMORY = (None, 2048, 8192, 14_000)
SELECTORS = (GpuSelector(), GpuSelector(include_models=("T4",)))


def _scheduler(policy: str, used: list[int], cpu: list[int]) -> Scheduler:
    state = ClusterState(NODES)
    scheduler = Scheduler(state, make_policy(policy, DEFAULT_WORKLOAD), rng=Random(7))
    gpus = [g.uuid for ns in state.nodes() for g in ns.gpus]
    for i, (held, host) in enumerate(zip(used, cpu, strict=True)):
        if held:
            there = GpuSelector(include_uuids=frozenset({gpus[i]}))
            placed = scheduler.select(make_pod(f"run{i}", held, cpu=host, selector=there))
            if placed is not None:  # None: the host's CPU is taken already
                state.charge(placed.assignment)
    return scheduler


@settings(max_examples=150, deadline=None)
@given(
    policy=st.sampled_from(POLICY_NAMES),
    used=st.lists(st.sampled_from([0, 25, 50, 75, 100]), min_size=GPUS, max_size=GPUS),
    cpu=st.lists(st.sampled_from([0, 1000, 3000]), min_size=GPUS, max_size=GPUS),
    cores=st.sampled_from(POD_CORES),
    memory=st.sampled_from(POD_MEMORY),
    selector=st.sampled_from(SELECTORS),
    freed=st.sets(st.sampled_from(["a", "b", "c", "gone"])),
)
def test_may_fit_answers_as_select_over_the_freed_nodes(
    policy: str,
    used: list[int],
    cpu: list[int],
    cores: int,
    memory: int | None,
    selector: GpuSelector,
    freed: set[str],
) -> None:
    ask = None if cores >= 100 else memory
    pod = make_pod("p", cores, memory_mib=ask, cpu=2000, selector=selector)
    arrival = Arrival.of(0.0, "A", pod, 60.0)
    names = [NodeName(n) for n in sorted(freed)]
    plain = _scheduler(policy, used, cpu)
    want = bool(names) and plain.select(pod, names) is not None
    offers = Offers(_scheduler(policy, used, cpu), {arrival.shape}, names, window=10)
    assert offers.may_fit(arrival) == want
