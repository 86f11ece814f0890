"""A context takes its allocations with it. CUDA Driver API reference: cuCtxDestroy "destroys and
cleans up all resources associated with the context", cuDevicePrimaryCtxReset (what
cudaDeviceReset does, the usual way out of a sticky error) "destroy[s] all allocations and
reset[s] all state on the primary context", and the last cuDevicePrimaryCtxRelease destroys the
primary context. Memory allocated in a context and never freed one by one is then free again on
the GPU, so the grant must give it back too, while what a context still alive holds stays
counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, Build, Cluster, build_program
from tests.isolation.test_memory_held import run

OOM = 2
BIG = 768 * MIB  # of a 1 GiB grant: two of them never fit at once


@pytest.fixture(scope="session")
def ctxcreate(build: Build) -> Path:
    return build_program(build, "ctxcreate")


@pytest.mark.parametrize("what", ["alloc", "array"])
def test_memory_of_a_destroyed_context_is_given_back(
    cluster: Cluster, ctxcreate: Path, what: str
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    steps = [f"{what}:{BIG}", "destroy", "create", "info", f"{what}:{BIG}"]
    got = run(cluster, container, ctxcreate, "v2:link", "0", *steps)
    assert got == {"create": [0, 0], what: [0, 0], "destroy": [0], "info": [1024 * MIB]}


@pytest.mark.parametrize("end", ["reset", "release"])
def test_memory_of_an_ended_primary_context_is_given_back(
    cluster: Cluster, ctxcreate: Path, end: str
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    steps = ["primary", f"alloc:{BIG}", end, "primary", f"alloc:{BIG}"]
    got = run(cluster, container, ctxcreate, "v2:link", "0", *steps)
    assert got == {"create": [0], "primary": [0, 0], "alloc": [0, 0], end: [0]}


def test_memory_of_a_live_context_stays_counted_when_another_is_destroyed(
    cluster: Cluster, ctxcreate: Path
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    steps = ["primary", f"alloc:{BIG}", "create", "destroy", "primary", f"alloc:{BIG}"]
    got = run(cluster, container, ctxcreate, "v2:link", "0", *steps)
    assert got["destroy"] == [0]
    assert got["alloc"] == [0, OOM]
