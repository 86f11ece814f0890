"""A child graph moved into its parent goes with the parent. CUDA Driver API reference,
CUDA_CHILD_GRAPH_NODE_PARAMS: "Graphs containing memory allocation or memory free nodes must set
the ownership to be moved to the parent", and CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE: "The handle to
the child graph is owned by the parent and will be destroyed when the parent is destroyed" (it
"Cannot be independently ... destroyed", so the program never names it to cuGraphDestroy). The
child's memory nodes count while the parent lives, and stop counting as a destroyed graph's do
once the parent is destroyed: a program that builds such a graph every step is not refused on
its second step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, Build, Cluster
from tests.isolation.test_memory_held import build_memload, run

OOM = 2


@pytest.fixture(scope="session")
def memload(build: Build) -> Path:
    return build_memload(build)


def test_memory_nodes_of_a_moved_child_stop_counting_when_its_parent_is_destroyed(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "childmove", "0", str(768 * MIB), "3", str(512 * MIB))
    assert got == {"add": [0, 0, 0], "child": [0, 0, 0], "other": [OOM] * 3, "destroy": [0] * 3}
