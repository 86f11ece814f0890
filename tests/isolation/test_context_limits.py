"""The context limits that size a buffer in device memory (cuCtxSetLimit: the per-thread stack,
the printf FIFO, the device malloc heap; cudaDeviceSetLimit reaches the same call) are counted
against the grant of the context's GPU from when they are raised until they are lowered or the
context ends, and refused past it with CUDA_ERROR_OUT_OF_MEMORY, one of cuCtxSetLimit's
documented answers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.isolation.conftest import GIB, MIB, Build, Cluster, build_program
from tests.isolation.standins import CONTEXT_BYTES
from tests.isolation.test_memory_held import parse, run

STACK, FIFO, HEAP = 0, 1, 2  # CUlimit
INVALID_VALUE, OOM, UNSUPPORTED_LIMIT = 1, 2, 215
THREADS = 40 * 1024  # the stand-in T4: 40 SMs x 1024 resident threads per SM
DEFAULTS = {STACK: 1024, FIFO: MIB, HEAP: 8 * MIB}  # the stand-in's, part of the context's own
GRANT = 4 * GIB


@pytest.fixture(scope="session")
def ctxlimit(build: Build) -> Path:
    return build_program(build, "ctxlimit")


def charge(limit: int, value: int) -> int:
    """What raising `limit` from its default to `value` takes on the stand-in T4."""
    per = THREADS if limit == STACK else 1
    return (value - DEFAULTS[limit]) * per


@pytest.mark.parametrize("how", ["set", "proc", "sym"])
def test_a_device_heap_set_past_the_grant_is_refused(
    cluster: Cluster, ctxlimit: Path, how: str
) -> None:
    container = cluster.admit([(0, 30, GRANT // MIB)])
    steps = [f"{how}:{HEAP}:{8 * GIB}", f"get:{HEAP}", f"alloc:{3 * GIB}"]
    got = run(cluster, container, ctxlimit, "0", *steps)
    assert got[how] == [OOM]
    assert got["get"] == [0, DEFAULTS[HEAP]]  # the driver never saw it
    assert got["alloc"] == [0]  # and nothing of it stayed counted


@pytest.mark.parametrize(("limit", "value"), [(STACK, 128 << 10), (FIFO, 5 * GIB)])
def test_a_stack_or_printf_fifo_past_the_grant_is_refused(
    cluster: Cluster, ctxlimit: Path, limit: int, value: int
) -> None:
    container = cluster.admit([(0, 30, GRANT // MIB)])
    got = run(cluster, container, ctxlimit, "0", f"set:{limit}:{value}", f"get:{limit}")
    assert charge(limit, value) > GRANT
    assert got["set"] == [OOM]
    assert got["get"] == [0, DEFAULTS[limit]]


@pytest.mark.parametrize(("limit", "value"), [(STACK, 64 << 10), (FIFO, 3 * GIB), (HEAP, 3 * GIB)])
def test_a_raised_limit_is_counted_against_the_grant_until_it_is_lowered(
    cluster: Cluster, ctxlimit: Path, limit: int, value: int
) -> None:
    container = cluster.admit([(0, 30, GRANT // MIB)])
    steps = [f"set:{limit}:{value}", f"alloc:{2 * GIB}", "info"]
    steps += [f"set:{limit}:{DEFAULTS[limit]}", f"alloc:{2 * GIB}", "info"]
    got = run(cluster, container, ctxlimit, "0", *steps)
    assert got["set"] == [0, 0]
    assert got["alloc"] == [OOM, 0]
    assert got["info"] == [GRANT - charge(limit, value), GRANT]


@pytest.mark.parametrize("end", [["ctx", "SET", "destroy"], ["SET", "reset"]])
def test_a_limits_charge_is_given_back_when_its_context_ends(
    cluster: Cluster, ctxlimit: Path, end: list[str]
) -> None:
    container = cluster.admit([(0, 30, GRANT // MIB)])
    steps = [f"set:{HEAP}:{3 * GIB}" if s == "SET" else s for s in end]
    got = run(cluster, container, ctxlimit, "0", *steps, f"alloc:{3 * GIB}", "info")
    assert got["set"] == [0]
    assert got["alloc"] == [0]
    assert got["info"] == [GRANT]


def test_a_limit_change_the_driver_refuses_leaves_no_charge(
    cluster: Cluster, ctxlimit: Path
) -> None:
    container = cluster.admit([(0, 30, GRANT // MIB)])
    # the heap size is fixed once a module is loaded (CUDA Programming Guide)
    got = run(cluster, container, ctxlimit, "0", "module", f"set:{HEAP}:{3 * GIB}", "info")
    assert got["module"] == [0]
    assert got["set"] == [INVALID_VALUE]
    assert got["info"] == [GRANT]


def test_a_limit_that_sizes_no_buffer_gets_the_drivers_own_answer(
    cluster: Cluster, ctxlimit: Path
) -> None:
    container = cluster.admit([(0, 30, GRANT // MIB)])
    got = run(cluster, container, ctxlimit, "0", "set:3:5", "info")  # the device runtime's depth
    assert got["set"] == [UNSUPPORTED_LIMIT]  # not simulated by the stand-in
    assert got["info"] == [GRANT]


def test_the_standin_takes_a_limits_memory_from_the_gpu_until_its_context_ends(
    cluster: Cluster, ctxlimit: Path
) -> None:
    """The stand-in driver alone (no interposer): its own accounting holds what a limit sizes."""
    steps = ["ctx", "info", f"set:{HEAP}:{GIB}", "info", f"set:{STACK}:1000", f"get:{STACK}"]
    steps += [f"set:{STACK}:{64 << 10}", "info", "destroy", "info"]
    asan = cluster.build.asan_runtime  # the sanitized stand-in needs its runtime first
    done = subprocess.run(
        [str(ctxlimit), "0", *steps],
        env=cluster.node.env({"LD_PRELOAD": asan} if asan else None),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = parse(done.stdout.splitlines())
    assert got["set"] == [0, 0, 0]
    assert got["get"] == [0, 1008]  # rounded up, as the reference allows
    heap, stack = charge(HEAP, GIB), charge(STACK, 64 << 10)
    assert got["info"][0] - got["info"][1] == heap
    assert got["info"][1] - got["info"][2] == stack
    assert got["info"][3] == got["info"][0] + CONTEXT_BYTES
