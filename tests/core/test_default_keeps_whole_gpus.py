"""The default policy keeps whole GPUs whole: a fractional pod goes into a partly used GPU that
fits it rather than onto an idle GPU, whatever shapes the policy has seen.

A real-cluster report had a 25-core pod placed on a just-emptied GPU while a 25-core hole waited
on another node, and asked whether `default`'s learned workload (not yet holding the whole-GPU
shape) was the cause. Over random states of two nodes of four GPUs, after no, small-only or
whole-only observed shapes, the policy never chose the idle GPU. What did give an emptied GPU
to small pods is the pass after a reclaim: the GPU went to the next pass's fair order (what
reclaim frees now goes to the job it was freed for: tests/core/test_release_reclaimed.py).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare
from vgpu.core.policy.specs import make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import DEFAULT_WORKLOAD

GPU_MMIB = 16_384 * 1000  # make_node's GPU memory, in mMiB
SEEN = {"none": [], "small": [25, 50] * 30, "whole": [100] * 60}


@settings(max_examples=150, deadline=None)
@given(
    used=st.lists(st.sampled_from([0, 25, 50, 75, 100]), min_size=8, max_size=8),
    ask=st.sampled_from([25, 50]),
    seen=st.sampled_from(sorted(SEEN)),
)
def test_a_fractional_pod_takes_a_fitting_hole_before_an_idle_gpu(
    used: list[int], ask: int, seen: str
) -> None:
    holes = [u for u in used if 0 < u <= 100 - ask]
    state = ClusterState([make_node("a", gpus=4), make_node("b", gpus=4)])
    scheduler = Scheduler(state, make_policy("default", DEFAULT_WORKLOAD))
    for cores in SEEN[seen]:
        scheduler.policy.observe(make_pod("seen", cores))
    for i, cores in enumerate(used):
        if cores:
            node, gpu = "ab"[i // 4], i % 4
            share = GpuShare(GpuUUID(f"GPU-{node}-{gpu}"), cores, GPU_MMIB * cores // 100)
            state.charge(
                Assignment(
                    PodKey(f"d/p{i}"),
                    NodeName(node),
                    1000,
                    1000,
                    (ContainerAssignment("c", (share,)),),
                )
            )
    chosen = scheduler.select(make_pod("small", ask))
    assert chosen is not None or not any(u <= 100 - ask for u in used)
    if chosen is None or not holes:
        return
    uuid = chosen.assignment.shares[0].uuid
    node, gpu = uuid.split("-")[1], int(uuid.split("-")[2])
    assert used["ab".index(node) * 4 + gpu] > 0, (used, uuid)
