"""CUDA 13's cuStreamBeginRecaptureToGraph captures into an existing graph again: "The node
creation order while recapturing the graph must be identical to the original graph", and it
fails at once on "Parameter mismatches for memory allocation or free nodes". A recaptured
cudaMallocAsync therefore redoes a memory node the graph already has (same size, same place), and
the graph holds no more memory than before: it is charged once, however often it is recaptured,
not once more per recapture (which refused the third recapture of a 400 MiB node under a 1 GiB
grant)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, Build, Cluster
from tests.isolation.test_memory_held import build_memload, run


@pytest.fixture(scope="session")
def memload(build: Build) -> Path:
    return build_memload(build)


def test_recapturing_a_graph_does_not_charge_its_memory_nodes_again(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    got = run(cluster, container, memload, "recapture", "0", str(400 * MIB), "3")
    assert got["recapture"] == [0, 0, 0]
    assert got["alloc"] == got["release"] == got["end"] == [0, 0, 0, 0]
    assert got["free_captured"] == got["free_recaptured"] == [624 * MIB]
