"""The extender's bind places a pod on kube-scheduler's node with the GPUs the simulator's
`select` takes there, for every shipped policy (one placement path through the core)."""

from __future__ import annotations

import pytest

from tests.core.test_one_path import LastDraw
from tests.extender.builders import ledger_of, make_node, make_pod
from vgpu.core.policy.specs import POLICY_NAMES, parse_policy
from vgpu.core.scheduler import Scheduler
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.service import Extender

ASKS = (30, 100, 50, 70, 200, 20, 90, 40, 25, 60)


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_bind_takes_the_gpus_the_simulator_takes(name: str) -> None:
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    for i, gpus in enumerate((2, 4, 1)):
        cache.apply_node("ADDED", make_node(f"n{i}", gpus=gpus, memory_mib=24576))
    ext = Extender(cache, config=ExtenderConfig(policy=parse_policy(name)))
    ext.scheduler.rng = LastDraw()
    policy = ext.policies.default
    simulator = Scheduler(ext.scheduler.state, policy, rng=LastDraw())
    placed = 0
    for i, cores in enumerate(ASKS):
        pod = make_pod(f"p{i}", cores=cores, cpu=str(i % 4))
        pod["metadata"]["uid"] = f"uid-{i}"
        cache.apply_pod("ADDED", pod)  # the watch shows the pod a request names
        spec, _, _ = ext.pods.read(pod)
        selection = simulator.select(spec.request)
        if selection is None:
            continue
        assert ext.cache.place(spec, selection.node, policy, ext.scheduler) == selection.assignment
        ledger_of(cache).assume(selection.assignment)
        placed += 1
    assert placed >= 7
