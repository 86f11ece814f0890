"""`BestNodes.in_holes` answers exactly as `Scheduler.select` of the pod refusing every idle GPU
(`whole_gpus.holes_only`), the placement a release pass uses while a queue waits for whole GPUs.

The replay's figures depend on it being the same answer, only cheaper: it reuses the shape's
ranking on nodes without an idle GPU and evaluates the others for the pod refusing that node's
idle GPUs. That holds because a policy evaluates a node through the GPUs of that node the selector
allows, which the second test holds every policy to.
"""

from __future__ import annotations

from dataclasses import replace
from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from tests.builders import make_node, make_pod
from vgpu.core.changes import ChangeFeed
from vgpu.core.ids import PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import GpuSelector, PodRequest
from vgpu.core.policy.specs import POLICY_NAMES, make_policy
from vgpu.core.queues.whole_gpus import holes_only
from vgpu.core.scheduler import Scheduler, Selection
from vgpu.core.state import ClusterState
from vgpu.core.workload import DEFAULT_WORKLOAD
from vgpu.sim.best_nodes import BestNodes

NODES = (
    make_node("a", gpus=4, cpu=48_000),
    make_node("b", gpus=2, model="V100", memory_mib=32768, cpu=16_000),
    make_node("c", gpus=2, model="T4", cpu=16_000),
    make_node("d", gpus=4, cpu=48_000),
    make_node("e", gpus=1, model="T4", cpu=8_000),
)
CORES = (10, 25, 50, 75, 100, 200)
MEMORY = (None, 2048, 8192, 14_000)
"""Memory asks (MiB): in proportion to the cores, or explicit (`--queue-memory`)."""
SELECTORS = (
    GpuSelector(),
    GpuSelector(include_models=("T4",)),
    GpuSelector(exclude_models=("T4",)),
)


class _World:
    """A cluster, its ledger and a scheduler; `best` is None for the plain `select` world."""

    def __init__(self, policy: str, indexed: bool) -> None:
        feed = ChangeFeed(limit=64) if indexed else None  # small: trims are exercised too
        self.state = ClusterState(NODES, feed=feed)
        self.ledger = Ledger(self.state)
        self.scheduler = Scheduler(self.state, make_policy(policy, DEFAULT_WORKLOAD), rng=Random(7))
        self.best = BestNodes(self.scheduler, feed) if feed is not None else None

    def select(self, pod: PodRequest) -> Selection | None:
        return self.best.select(pod) if self.best else self.scheduler.select(pod)

    def in_holes(self, pod: PodRequest) -> Selection | None:
        if self.best:
            return self.best.in_holes(pod)
        return self.scheduler.select(holes_only(self.state, pod))


class SameHoles(RuleBasedStateMachine):
    """Two identical clusters driven alike; one answers through `BestNodes`."""

    @initialize(policy=st.sampled_from(POLICY_NAMES))
    def start(self, policy: str) -> None:
        self.worlds = (_World(policy, False), _World(policy, True))
        self.placed: list[PodKey] = []
        self.count = 0

    def _pod(self, cores: int, memory: int | None, selector: GpuSelector) -> PodRequest:
        self.count += 1
        return make_pod(f"p{self.count}", cores, memory_mib=memory, cpu=2000, selector=selector)

    @rule(
        cores=st.sampled_from(CORES),
        memory=st.sampled_from(MEMORY),
        selector=st.sampled_from(SELECTORS),
        holes=st.booleans(),
    )
    def place(self, cores: int, memory: int | None, selector: GpuSelector, holes: bool) -> None:
        """Place a pod where the policy puts it, or among the holes as a release pass would
        while a queue waits for whole GPUs (both answers compared either way)."""
        pod = self._pod(cores, None if cores >= 100 else memory, selector)
        plain, indexed = (w.select(pod) for w in self.worlds)
        assert plain == indexed
        plain_holes, indexed_holes = (w.in_holes(pod) for w in self.worlds)
        assert plain_holes == indexed_holes
        chosen = plain_holes if holes and plain_holes is not None else plain
        if chosen is not None:
            for w in self.worlds:
                w.ledger.confirm(chosen.assignment)
            self.placed.append(pod.key)

    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        if self.placed:
            key = self.placed.pop(data.draw(st.integers(0, len(self.placed) - 1)))
            for w in self.worlds:
                w.ledger.release(key)


SameHoles.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
test_in_holes_answers_as_select_of_the_pod_refusing_every_idle_gpu = SameHoles.TestCase


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(POLICY_NAMES),
    used=st.lists(st.sampled_from([0, 25, 50, 100]), min_size=13, max_size=13),
    cores=st.sampled_from(CORES),
    memory=st.sampled_from(MEMORY),
    refused=st.lists(st.integers(0, 12), max_size=6),
)
def test_a_policy_evaluates_a_node_through_the_gpus_of_it_the_selector_allows(
    policy: str, used: list[int], cores: int, memory: int | None, refused: list[int]
) -> None:
    """Refusing GPUs of other nodes changes no node's evaluation, and refusing some of a node's
    own GPUs gives the evaluation of refusing just those (what `in_holes` relies on)."""
    state = ClusterState(NODES)
    scheduler = Scheduler(state, make_policy(policy, DEFAULT_WORKLOAD), rng=Random(7))
    gpus = [(ns.name, g.uuid) for ns in state.nodes() for g in ns.gpus]
    for i, held in enumerate(used):
        if held:
            there = GpuSelector(include_uuids=frozenset({gpus[i][1]}))
            placed = scheduler.select(make_pod(f"run{i}", held, cpu=1000, selector=there))
            assert placed is not None
            state.charge(placed.assignment)
    pod = make_pod("p", cores, memory_mib=None if cores >= 100 else memory, cpu=2000)
    all_refused = frozenset(gpus[i][1] for i in refused)
    everywhere = replace(pod, selector=GpuSelector(exclude_uuids=all_refused))
    for ns in state.nodes():
        own = frozenset(u for u in all_refused if u in ns.positions)
        here = replace(pod, selector=GpuSelector(exclude_uuids=own))
        policy_of = scheduler.policy
        assert policy_of.evaluate(ns, everywhere, Random(1)) == policy_of.evaluate(
            ns, here, Random(1)
        )
