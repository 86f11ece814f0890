"""Issue 25, finding 8: the default policy's evaluation memo is bounded by size, not by the pods
scheduled (it grew ~2 KB per pod life to 200,000 entries, ~400 MiB, before it cleared)."""

from __future__ import annotations

import tracemalloc

from tests.builders import make_node, make_pod
from vgpu.core.policy_default import MEMO_LIMIT, DefaultPolicy
from vgpu.core.registry import make_policy
from vgpu.core.scheduler import Scheduler
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
