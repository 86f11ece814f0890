"""A program built for the per-thread default stream (nvcc --default-stream per-thread,
CUDA_API_PER_THREAD_DEFAULT_STREAM) reaches the driver through the _ptsz entry points, whose NULL
stream is CU_STREAM_PER_THREAD, and that stream can be captured (cuStreamBeginCapture: only
CU_STREAM_LEGACY cannot). cudaMallocAsync(&p, n, 0) inside such a capture is
cuMemAllocAsync_ptsz(&p, n, NULL) on a capturing stream: a graph memory node (cuMemAllocAsync:
"During stream capture, this function results in the creation of an allocation node"), charged
at capture like any other. Asked about the legacy stream instead, the library saw no capture,
counted the call as a pool allocation the pool never made, and the graph's memory ran
uncounted once launched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, Build, Cluster
from tests.isolation.test_memory_held import build_memload, run

OOM = 2


@pytest.fixture(scope="session")
def memload(build: Build) -> Path:
    return build_memload(build)


def test_an_allocation_captured_on_the_per_thread_default_stream_is_charged(
    cluster: Cluster, memload: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    args = ["capture", "0", "0", str(768 * MIB), "1", "ptds", str(768 * MIB)]
    got = run(cluster, container, memload, *args)
    assert got["rc"] == [0]
    assert got["free_captured"] == [256 * MIB]  # the node is charged at capture
    assert got["end"] == got["launch"] == [0]
    assert got["free_launched"] == [256 * MIB]
    assert got["other"] == [OOM]  # the launched graph holds 768 MiB of the 1 GiB grant
