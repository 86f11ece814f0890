"""Every form of cuCtxCreate (CUDA Driver API reference: cuCtxCreate before CUDA 3.2,
cuCtxCreate_v2, cuCtxCreate_v3 with execution affinity since 11.4, cuCtxCreate_v4 with
CUctxCreateParams since 12.5, what "cuCtxCreate" is in CUDA 13), however the program reaches it
(linked, cuGetProcAddress, dlsym), refuses a GPU the container does not hold, as cuCtxCreate_v2
does, and a context it creates is known by its GPU, so its memory is counted there even where the
driver cannot say which device the current context is on (no cuCtxGetDevice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.isolation.conftest import MIB, Build, Cluster, build_program, build_without
from tests.isolation.test_memory_held import run

FORMS = [f"{form}:{via}" for form in ("v1", "v2", "v3", "v4") for via in ("link", "proc", "sym")]
INVALID_DEVICE, OOM = 101, 2


@pytest.fixture(scope="session")
def ctxcreate(build: Build) -> Path:
    return build_program(build, "ctxcreate")


@pytest.mark.parametrize("how", FORMS)
def test_a_context_on_a_gpu_the_container_does_not_hold_is_refused(
    cluster: Cluster, ctxcreate: Path, how: str
) -> None:
    container = cluster.admit([(0, 30, 1024)])  # the node's GPU 1 is reachable, not granted
    assert run(cluster, container, ctxcreate, how, "1") == {"create": [INVALID_DEVICE]}
    assert run(cluster, container, ctxcreate, how, "0")["create"] == [0]


@pytest.mark.parametrize("how", FORMS)
def test_memory_in_a_created_context_counts_on_its_gpu_without_cuctxgetdevice(
    build: Build, ctxcreate: Path, tmp_path: Path, how: str
) -> None:
    cluster = Cluster(build_without(build, "cuCtxGetDevice"), 2, tmp_path)
    container = cluster.admit([(0, 30, 2048), (1, 30, 1024)])
    steps = [f"alloc:{768 * MIB}", "info", f"alloc:{768 * MIB}"]
    got = run(cluster, container, ctxcreate, how, "1", *steps)
    assert got == {"create": [0], "alloc": [0, OOM], "info": [256 * MIB]}
