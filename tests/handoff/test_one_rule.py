"""One hand-off rule: the extender and the agent see every pending container identically (the
same `PendingContainer`, so the same `confusable` answers), whatever the pod."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kubelet_model.pods import random_pod
from tests.kubelet_model.world import World
from vgpu.node.devices import UnitKind

QUIET_LOGS = True  # the model refuses on purpose: keep its warnings out (tests/handoff/conftest.py)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_extender_and_agent_derive_the_same_pending_containers(seed: int) -> None:
    rng = random.Random(seed)
    world = World(nodes=1, gpus=4, seed=seed)
    key = world.submit(random_pod(rng, "p"))
    if not world.schedule(key):
        return  # did not fit: nothing pending
    spec = world.cache.pods[key]
    held = world.cache.ledger.holding(key)
    assert held is not None
    extender_view = {c.container: c for c in spec.pending(held.assignment)}
    node = world.nodes["node-0"]
    agent_view = {}
    sizes = {c.cores for c in spec.request.containers} | set(spec.memory_blocks.values())
    for kind in (UnitKind.CORES, UnitKind.MEMORY):
        # Walk the pod's containers in the kubelet's order, as its calls would.
        while True:
            candidates = [
                c
                for size in sizes - {0}
                for c in node.handoff.candidates(kind, size)
                if c.pod == key
            ]
            if not candidates:
                break
            (first,) = candidates
            agent_view[first.container.name] = first.pending
            node.handoff.admit(key, first.container.name, kind, ["x"])
    assert extender_view and agent_view == extender_view
