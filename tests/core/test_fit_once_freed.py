"""`fits_once_kubelet_frees`: a what-if that frees what the kubelet holds for deleted pods.

Checked against the state built again from scratch with the kubelet holding nothing and the same
pods held, for random nodes, holdings and pods; and the node's own state is left as it was."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod
from vgpu.core.fit import check, fits_once_kubelet_frees
from vgpu.core.ids import NodeName
from vgpu.core.ledger import Ledger
from vgpu.core.model import Node
from vgpu.core.placement import assignment_for, choose
from vgpu.core.state import ClusterState

N1 = NodeName("n1")
CORES = st.sampled_from([10, 25, 30, 50, 60, 75, 100])


def _held(node: Node, pods: list[tuple[int, int]]) -> ClusterState:
    """`node` with the pods (cores, memory MiB) placed where they fit, in order."""
    state = ClusterState([node])
    ledger = Ledger(state)
    for i, (cores, mib) in enumerate(pods):
        ns = state.node(N1)
        pod = make_pod(f"held{i}", cores, memory_mib=mib)
        choice = choose(ns, pod)
        if choice is not None:
            ledger.assume(assignment_for(ns, pod, choice))
    return state


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 100), st.sampled_from([0, 1024, 4096, 8192])), min_size=2),
    st.lists(st.tuples(CORES, st.sampled_from([1024, 4096])), max_size=4),
    st.lists(CORES, min_size=1, max_size=2),
)
def test_the_what_if_matches_the_node_without_the_kubelets_holdings(
    stale: list[tuple[int, int]], held: list[tuple[int, int]], asked: list[int]
) -> None:
    base = make_node("n1", gpus=len(stale))
    gpus = tuple(
        dataclasses.replace(g, stale_cores=c, stale_memory_mib=m)
        for g, (c, m) in zip(base.gpus, stale, strict=False)
    )
    node = dataclasses.replace(base, gpus=gpus)
    without = _held(base, held)  # the same pods first, so they land alike on both
    state = ClusterState([base])
    ledger = Ledger(state)
    for holding in without.holdings.values():
        ledger.assume(holding.assignment)
    state.add_node(node)  # now the kubelet holds `stale` beside them
    ns = state.node(N1)
    pod = make_pod("p", *asked)
    before = (list(ns.free_cores), list(ns.free_mem), ns.version)
    expected = any(c or m for c, m in stale) and check(without.node(N1), pod).ok
    assert fits_once_kubelet_frees(ns, pod) == expected
    assert (list(ns.free_cores), list(ns.free_mem), ns.version) == before
