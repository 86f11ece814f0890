"""The default policy's evaluation memo is bounded by size, not by the pods
scheduled (it grew ~2 KB per pod life to 200,000 entries, ~400 MiB, before it cleared)."""

from __future__ import annotations

import tracemalloc

from tests.builders import make_node, make_pod
from vgpu.core.policy.default import MEMO_LIMIT, DefaultPolicy
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import _KEYS, NODE_MEMO_KEPT, SHAPES_KEPT, Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import Workload


def test_the_evaluation_memo_stays_small_over_many_distinct_pod_lives() -> None:
    state = ClusterState([make_node("n1", gpus=4)])
    policy = make_policy("default:online=0", Workload((), ()))
    assert isinstance(policy, DefaultPolicy)
    sched = Scheduler(state, policy)
    (ns,) = state.nodes()
    tracemalloc.start()
    try:
        for i in range(1, 12_001):  # every pod a new shape: a new memo key each
            sched.evaluate(ns, make_pod(f"p{i}", 10, cpu=i))
            if i == 2_000:
                early, _ = tracemalloc.get_traced_memory()
        late, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(policy._same) <= MEMO_LIMIT <= 8192
    assert late - early < 16 << 20  # flat: bounded by MEMO_LIMIT, not by 10,000 more pods


def test_shape_keys_and_a_quiet_nodes_memo_stay_bounded_over_many_pod_shapes() -> None:
    """A node nobody places on keeps its memo; every new pod shape used to add a key to the
    scheduler's table and an evaluation to that memo, for good."""
    state = ClusterState([make_node("n1", gpus=4)])
    policy = make_policy("default:online=0", Workload((), ()))
    sched = Scheduler(state, policy)
    (ns,) = state.nodes()
    for i in range(1, SHAPES_KEPT + 2_001):
        sched.evaluate(ns, make_pod(f"p{i}", 10, cpu=i))
    assert len(ns.cache) <= NODE_MEMO_KEPT + 8  # + the policy's own per-node entries
    assert len(_KEYS[policy]) <= SHAPES_KEPT
