"""`BestNodes` answers exactly as `Scheduler.select` over every node: the same node, score, GPUs
and assignment after any mix of placements, departures, what-ifs, nodes joining or replaced, and
re-learned workloads (the queued replay's figures depend on it being the same answer, faster)."""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.builders import make_node, make_pod
from vgpu.core.changes import ChangeFeed
from vgpu.core.ids import PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import GpuSelector, Node, PodRequest
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import Scheduler, Selection
from vgpu.core.state import ClusterState
from vgpu.core.workload import Workload
from vgpu.sim.best_nodes import BestNodes

NODES = (
    make_node("a", gpus=8, cpu=96_000),
    make_node("b", gpus=4, model="V100", memory_mib=32768, cpu=32_000),
    make_node("c", gpus=2, model="T4", cpu=16_000),
    make_node("d", gpus=8, cpu=96_000),
    make_node("e", gpus=1, model="T4", cpu=8_000),
    make_node("f", gpus=4, model="V100", memory_mib=32768, cpu=32_000),
)
SHAPES: tuple[tuple[tuple[int, ...], int], ...] = (
    ((10,), 1000),
    ((25,), 2000),
    ((50,), 4000),
    ((100,), 8000),
    ((200,), 16000),
    ((400,), 32000),
    ((), 4000),
    ((30, 30), 2000),
    ((800,), 90_000),
)
POLICIES = ("default", "default:online=0", "bestfit", "gpupacking", "fgd", "random")


class _World:
    """A cluster, its ledger and a scheduler; `best` is None for the plain `select` world."""

    def __init__(self, policy: str, nodes: tuple[Node, ...], indexed: bool) -> None:
        feed = ChangeFeed(limit=64) if indexed else None  # small: trims are exercised too
        self.state = ClusterState(nodes, feed=feed)
        self.ledger = Ledger(self.state)
        self.scheduler = Scheduler(self.state, make_policy(policy, Workload((), ())), rng=Random(7))
        self.best = BestNodes(self.scheduler, feed) if feed is not None else None

    def select(self, pod: PodRequest) -> Selection | None:
        return self.best.select(pod) if self.best else self.scheduler.select(pod)


class SameAnswers(RuleBasedStateMachine):
    """Two identical clusters driven alike; one selects through `BestNodes`."""

    @initialize(policy=st.sampled_from(POLICIES))
    def start(self, policy: str) -> None:
        self.worlds = (_World(policy, NODES, False), _World(policy, NODES, True))
        self.placed: list[PodKey] = []
        self.count = 0
        self.joined = 0

    def _pod(self, shape: int) -> PodRequest:
        self.count += 1
        cores, cpu = SHAPES[shape]
        return make_pod(f"p{self.count}", *cores, cpu=cpu)

    @rule(shape=st.integers(0, len(SHAPES) - 1))
    def place(self, shape: int) -> None:
        pod = self._pod(shape)
        plain, indexed = (w.select(pod) for w in self.worlds)
        assert plain == indexed
        if plain is not None:
            for w in self.worlds:
                w.ledger.confirm(plain.assignment)
            self.placed.append(pod.key)

    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        if self.placed:
            key = self.placed.pop(data.draw(st.integers(0, len(self.placed) - 1)))
            for w in self.worlds:
                w.ledger.release(key)

    @rule(shape=st.integers(0, len(SHAPES) - 1), gone=st.integers(0, 3))
    def what_if(self, shape: int, gone: int) -> None:
        """The reclaim what-if: evict some pods on a fork, ask on their nodes, revert."""
        pod = self._pod(shape)
        answers = []
        for w in self.worlds:
            with w.state.what_if():
                nodes = [a.node for k in self.placed[-gone:] if (a := w.ledger.release(k))]
                answers.append(w.scheduler.select(pod, sorted(set(nodes))))
        assert answers[0] == answers[1]

    @rule(name=st.sampled_from(["a", "c", "new", "smaller", "other-model"]))
    def node_joins_or_is_replaced(self, name: str) -> None:
        """A node joins, or one is replaced by the same inventory, a smaller one, or GPUs of
        another model in the same free state."""
        self.joined += 1
        node = {
            "new": make_node(f"new{self.joined}", gpus=2),
            "smaller": make_node("d", gpus=4, cpu=48_000),
            "other-model": make_node("f", gpus=4, model="T4", memory_mib=32768, cpu=32_000),
        }.get(name) or NODES["ac".index(name)]
        for w in self.worlds:
            w.state.add_node(node)

    @invariant()
    def same_free_capacity(self) -> None:
        if hasattr(self, "worlds"):
            plain, indexed = (
                [(ns.name, ns.free_cores, ns.cpu_free) for ns in w.state.nodes()]
                for w in self.worlds
            )
            assert plain == indexed


SameAnswers.TestCase.settings = settings(max_examples=100, stateful_step_count=60, deadline=None)
test_best_nodes_answer_as_select_over_every_node = SameAnswers.TestCase


def test_ties_go_to_the_first_node_in_order_as_select_breaks_them() -> None:
    world = _World("bestfit", tuple(make_node(n, gpus=4) for n in "xyz"), True)
    got = world.select(make_pod("p", 100))
    assert got is not None and got.node == "x"


def test_the_feed_must_be_the_states_own() -> None:
    state = ClusterState(NODES)
    with pytest.raises(ValueError, match="feed"):
        BestNodes(Scheduler(state, make_policy("bestfit", Workload((), ()))), ChangeFeed())


def test_a_node_replaced_by_other_gpus_in_the_same_free_state_is_evaluated_again() -> None:
    world = _World("bestfit", (make_node("n", gpus=2, model="A100"),), True)
    a100_only = make_pod("p", 50, selector=GpuSelector(include_models=("A100",)))
    assert world.select(a100_only) is not None
    world.state.add_node(make_node("n", gpus=2, model="T4"))
    assert world.select(a100_only) is None
