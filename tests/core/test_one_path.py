"""One placement path: for the same state and pod, the simulator's `select` and the extender's
`place` (kube-scheduler picked the node) take the same GPUs, for every shipped policy.

The extender used to place with the policy's evaluation alone, skipping `finish`, so `random`
drew its GPU in the simulator but took the best-fit GPU in a cluster.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from random import Random
from typing import TYPE_CHECKING, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.fit import Verdict
from vgpu.core.ledger import Ledger
from vgpu.core.model import PodRequest
from vgpu.core.policy.specs import POLICY_NAMES, make_policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.workload import workload_from

if TYPE_CHECKING:
    from _typeshed import SupportsLenAndGetItem

T = TypeVar("T")
cores = st.sampled_from([5, 10, 25, 30, 47, 50, 81, 100, 200])
pods = st.lists(st.lists(cores, min_size=1, max_size=2), min_size=1, max_size=20)


class LastDraw(Random):
    """Draws are fixed (the last element), so the two paths are compared on their choices, not
    on how many numbers each drew before."""

    def choice(self, seq: SupportsLenAndGetItem[T]) -> T:
        return seq[-1]

    def shuffle(self, x: MutableSequence[object], *args: object) -> None:
        raise AssertionError("placement does not shuffle")


def _state() -> ClusterState:
    return ClusterState(
        [
            make_node("a", gpus=2, memory_mib=16384),
            make_node("b", gpus=4, memory_mib=24576, cpu=32_000),
            make_node("c", gpus=1, memory_mib=81920),
        ]
    )


def _requests(spec: list[list[int]]) -> list[PodRequest]:
    return [make_pod(f"p{i}", *c, cpu=1000 * (i % 5)) for i, c in enumerate(spec)]


@pytest.mark.parametrize("name", POLICY_NAMES)
@settings(max_examples=25, deadline=None)
@given(spec=pods)
def test_select_and_place_take_the_same_gpus(name: str, spec: list[list[int]]) -> None:
    state, requests = _state(), _requests(spec)
    policy = make_policy(name, workload_from(requests))
    simulator = Scheduler(state, policy, rng=LastDraw())
    extender = Scheduler(state, policy, rng=LastDraw())
    ledger = Ledger(state)
    for pod in requests:
        selection = simulator.select(pod)
        if selection is None:
            assert all(isinstance(extender.place(pod, ns.name), Verdict) for ns in state.nodes())
            continue
        assert extender.place(pod, selection.node) == selection.assignment
        ledger.assume(selection.assignment)
