"""`ClusterCache.pending_nodes` finds, from the few pods with an assumption or a pick, every node
where `pending_on` names a container, whatever mix of picks, binds, failed binds, expiries,
releases and deletions came before (a node it missed once let a pod be refused with no wait, and
kube-scheduler evict another for it: tests/realk8s/test_preemption.py; a new policy generation
forgets the filter answers of those nodes)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.extender.builders import make_node, make_pod
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare
from vgpu.extender.cache.cluster import ClusterCache

KEY = b"k" * 32
PODS = st.sampled_from([f"p{i}" for i in range(6)])
NODES = st.sampled_from(["n1", "n2", "n3"])
NOBODY = PodKey("default/nobody")


class PendingNodes(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cache = ClusterCache(key=KEY, memory_unit_mib=256)
        for node in ("n1", "n2", "n3"):
            self.cache.apply_node("ADDED", make_node(node))
        self.now = 0.0

    def _assignment(self, pod: str, node: str) -> Assignment:
        share = GpuShare(GpuUUID(f"GPU-{node}-0"), 10, 1024 * 1000)
        container = ContainerAssignment("main", (share,))
        return Assignment(PodKey(f"default/{pod}"), NodeName(node), 100, 0, (container,))

    @rule(pod=PODS, node=NODES)
    def pick(self, pod: str, node: str) -> None:
        self.cache.pick(self._assignment(pod, node), self.now)

    @rule(pod=PODS, node=NODES)
    def bind(self, pod: str, node: str) -> None:
        key = PodKey(f"default/{pod}")
        self.cache.drop_pick(key)
        if self.cache.holding(key) is None:
            self.cache.assume(self._assignment(pod, node), self.now)

    @rule(pod=PODS)
    def bind_returns(self, pod: str) -> None:
        self.cache.bind_done(PodKey(f"default/{pod}"))

    @rule(pod=PODS)
    def bind_fails(self, pod: str) -> None:
        key = PodKey(f"default/{pod}")
        self.cache.bind_done(key)
        self.cache.drop_assumption(key)

    @rule(pod=PODS)
    def filtered_again(self, pod: str) -> None:
        self.cache.drop_pick(PodKey(f"default/{pod}"))

    @rule(pod=PODS)
    def released(self, pod: str) -> None:
        self.cache.release(PodKey(f"default/{pod}"))

    @rule(pod=PODS)
    def deleted(self, pod: str) -> None:
        self.cache.apply_pod("DELETED", make_pod(pod))

    @rule(seconds=st.sampled_from([1.0, 10.0, 60.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        self.cache.expire_assumptions(self.now, ttl=30.0, pick_ttl=5.0)

    @invariant()
    def every_node_with_pending_containers_is_found(self) -> None:
        with self.cache.atomic():
            busy = {
                node
                for node in ("n1", "n2", "n3")
                if self.cache.pending_on(NodeName(node), besides=NOBODY)
            }
        assert busy <= self.cache.pending_nodes()


PendingNodes.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
test_pending_nodes_covers_every_node_with_pending_containers = PendingNodes.TestCase


def test_a_pick_made_while_a_deleted_pods_bind_is_in_flight_keeps_its_time() -> None:
    """Found by the soak: a pod deleted while its bind was in flight, a pick of the same name,
    then the pod filtered again. The pick is kept for the bind in flight, and once kept without
    its time it was neither expired nor found by `pending_nodes`."""
    machine = PendingNodes()
    machine.bind("p0", "n1")
    machine.deleted("p0")
    machine.pick("p0", "n1")
    machine.filtered_again("p0")
    machine.every_node_with_pending_containers_is_found()
    machine.time_passes(10.0)  # past the pick's time: released
    assert machine.cache.holding(PodKey("default/p0")) is None
