"""One hand-off rule: the extender and the agent see every pending container identically (the
same `PendingContainer`, so the same `confusable` answers), whatever the pod."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kubelet_model.pods import random_pod
from tests.kubelet_model.world import World
from vgpu.core.handoff_rule import PendingContainer
from vgpu.node.devices import UnitKind

QUIET_LOGS = True  # the model refuses on purpose: keep its warnings out (tests/handoff/conftest.py)


KIND = {"cores": UnitKind.CORES, "memory": UnitKind.MEMORY}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_extender_and_agent_derive_the_same_pending_containers(seed: int) -> None:
    """At every step of the kubelet's admission of a pod (its containers in allocation order,
    each resource a container asks), the container the agent offers for that call is the
    extender's next pending container, equal field for field (asks, shares, cores limit, the
    grants after it) given the containers admitted so far; and once all are admitted, the
    agent offers nothing more of the pod."""
    rng = random.Random(seed)
    world = World(nodes=1, gpus=4, seed=seed)
    key = world.submit(random_pod(rng, "p"))
    assert world.schedule(key)  # one pod of at most two GPUs, on an empty 4-GPU node
    spec = world.cache.pods[key]
    held = world.cache.ledger.holding(key)
    assert held is not None
    handoff = world.nodes["node-0"].handoff
    sizes = {c.cores for c in spec.request.containers} | set(spec.memory_blocks.values())

    def offered(kind: UnitKind) -> list[PendingContainer]:
        return [c.pending for n in sizes - {0} for c in handoff.candidates(kind, n) if c.pod == key]

    admitted: list[str] = []
    pending = spec.pending(held.assignment)
    assert pending
    while pending:
        expected = pending[0]
        for ask, size in expected.asks:
            kind = KIND[ask]
            assert offered(kind) == [expected]
            handoff.admit(key, expected.container, kind, ["x"] * size)
        admitted.append(expected.container)
        pending = spec.pending(held.assignment, admitted)
    assert offered(UnitKind.CORES) == offered(UnitKind.MEMORY) == []
