"""The stand-in libcuda.so.1 against the CUDA Driver API's documented semantics, driven by the
`cuprobe` C program (direct symbols) and a ctypes program (cuGetProcAddress), no interposer."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.isolation.standin_node import holding, simulated_node
from tests.isolation.standins import (
    CONTEXT_BYTES,
    GIB,
    Node,
    Standins,
    cached_build,
    gcc_available,
    node_gpus,
)

pytestmark = pytest.mark.skipif(not gcc_available(), reason="needs gcc")

OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY
MIB = 1 << 20


@pytest.fixture(scope="session")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    return cached_build(tmp_path_factory.getbasetemp())


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    with simulated_node(tmp_path_factory.getbasetemp(), node_gpus(2, memory=GIB)) as node:
        yield node


def probe(node: Node, *steps: str) -> list[list[str]]:
    done = subprocess.run(
        [str(node.built.cuprobe), *steps],
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines()]


def rcs(lines: list[list[str]], op: str) -> list[int]:
    return [int(line[2]) for line in lines if line[0] == op]


def test_context_takes_its_documented_memory_and_totals_are_the_gpu(node: Node) -> None:
    info = probe(node, "info")[-1]
    assert (int(info[1]), int(info[2])) == (GIB - CONTEXT_BYTES, GIB)


def test_allocation_past_the_pool_fails_with_out_of_memory(node: Node) -> None:
    free = GIB - CONTEXT_BYTES
    lines = probe(node, f"alloc:{free}", "alloc:1", "freeall", f"alloc:{free}")
    assert rcs(lines, "alloc") == [0, OOM, 0]


@pytest.mark.parametrize(
    ("step", "bytes_"),
    [
        ("alloc:1000", 1000),
        ("pitch:1000:10", 512 * 2 * 10),
        ("managed:4096", 4096),
        ("async:4096", 4096),
        ("pool:4096", 4096),
        ("vmm:2097152", 2 * MIB),
        ("array:100:10", 100 * 10 * 4),
        ("array3d:10:10:10", 10 * 10 * 10 * 4),
        ("mipmap:64:64:3", (64 * 64 + 32 * 32 + 16 * 16) * 4),
    ],
)
def test_every_allocation_path_draws_from_the_pool_and_its_free_gives_back(
    node: Node, step: str, bytes_: int
) -> None:
    lines = probe(node, "info", step, "info", "freeall", "info")
    free = [int(line[1]) for line in lines if line[0] == "info"]
    assert free[0] - free[1] == bytes_
    assert free[2] == free[0]
    assert not [line for line in lines if line[0] == "free-failed"]


def test_processes_share_one_pool_and_sigkill_gives_memory_back(node: Node) -> None:
    half = 450 * MIB  # a second holder's context leaves less than this
    with holding(node, f"alloc:{half}") as holder:
        lines = probe(node, "info", f"alloc:{half}", "info")
        free_seen = int(lines[2][1])
        assert free_seen == GIB - 2 * CONTEXT_BYTES - half
        assert rcs(lines, "alloc") == [OOM]
        assert node.usage().held[node.gpus[0].uuid, holder.pid] == half + CONTEXT_BYTES
    assert rcs(probe(node, f"alloc:{2 * half}"), "alloc") == [0]
    assert node.usage().used[node.gpus[0].uuid] == 0


def test_busy_time_is_exactly_the_launched_time_and_launches_take_it(node: Node) -> None:
    # 20 launches of 50 blocks at 100 us per block: 100 ms of device time.
    lines = probe(node, "spin:100000:50:20")
    assert lines[-1][:2] == ["spin", "0"]
    assert int(lines[-1][2]) >= 100_000_000
    busy = node.usage().busy_ns
    assert list(busy.values()) == [100_000_000]


@pytest.mark.parametrize("path", ["ex", "coop", "graph"])
def test_every_launch_path_takes_simulated_time(node: Node, path: str) -> None:
    lines = probe(node, f"{path}:200000:10:10")
    assert lines[-1][:2] == [path, "0"]
    assert int(lines[-1][2]) >= 20_000_000
    assert sum(node.usage().busy_ns.values()) == 20_000_000


def test_one_timeline_per_gpu_time_slices_processes_so_each_waits_for_the_others_turns(
    node: Node,
) -> None:
    # Two processes each queue 300 ms at once; without MPS the GPU time-slices between their
    # contexts (timeline.c), so both finish about 600 ms after both started, not one at 300.
    cmd = [str(node.built.cuprobe), "spin:1000000:10:30"]
    procs = [
        subprocess.Popen(cmd, env=node.env(), stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=30)[0].split() for p in procs]
    elapsed = sorted(int(out[-1]) for out in outs)
    assert elapsed[0] >= 500_000_000 and elapsed[1] >= 550_000_000
    busy = node.usage().busy_ns
    assert sorted(busy.values()) == [300_000_000, 300_000_000]


EVENTS_PROGRAM = r"""
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
V = ctypes.c_void_p
ctx, mod, f, start, end = V(), V(), V(), V(), V()
assert cu.cuInit(0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuModuleLoadData(ctypes.byref(mod), b"vgpu-standin-module\nfunc spin 0\n") == 0
assert cu.cuModuleGetFunction(ctypes.byref(f), mod, b"spin") == 0
assert cu.cuEventCreate(ctypes.byref(start), 0) == 0 and cu.cuEventCreate(ctypes.byref(end), 0) == 0
ns = ctypes.c_uint64(100_000_000)
params = (V * 1)(ctypes.cast(ctypes.pointer(ns), V))
assert cu.cuEventRecord(start, None) == 0
assert cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, None, params, None) == 0
assert cu.cuEventRecord(end, None) == 0
assert cu.cuEventSynchronize(end) == 0
ms = ctypes.c_float()
assert cu.cuEventElapsedTime(ctypes.byref(ms), start, end) == 0
print(ms.value)
"""


def event_ms(node: Node) -> float:
    done = subprocess.run(
        [sys.executable, "-c", EVENTS_PROGRAM],
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


def test_events_around_a_kernel_also_time_another_processs_turns(node: Node) -> None:
    # NVIDIA: the time between two events may include other work. A 100 ms kernel alone is
    # timed at 100 ms; beside a process with work queued the two take turns, so its events
    # measure about 200 ms while its own busy time stays 100 ms.
    assert 99 <= event_ms(node) < 120
    neighbour = subprocess.Popen(
        [str(node.built.cuprobe), "spin:1000000:10:100"], env=node.env(), stdout=subprocess.PIPE
    )
    try:
        assert 180 <= event_ms(node) < 260
    finally:
        neighbour.kill()
        neighbour.communicate(timeout=30)


CTYPES_PROGRAM = r"""
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
fn = ctypes.c_void_p()
status = ctypes.c_int(-1)
gpa = cu.cuGetProcAddress_v2
gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]
out = {}
for name in sys.argv[1:]:
    rc = gpa(name.encode(), ctypes.byref(fn), 12040, 0, ctypes.byref(status))
    out[name] = (rc, status.value, fn.value == ctypes.cast(getattr(cu, name + "_v2", None)
                  or getattr(cu, name, None) or 0, ctypes.c_void_p).value if rc == 0 else None)
ctx = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
alloc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t)
rc = gpa(b"cuMemAlloc", ctypes.byref(fn), 12040, 0, None)
ptr = ctypes.c_uint64()
out["alloc"] = alloc(fn.value)(ctypes.byref(ptr), 1 << 20) if rc == 0 else rc
print(repr(out))
"""


def ctypes_program(node: Node, *names: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CTYPES_PROGRAM, *names],
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = ast.literal_eval(done.stdout)
    return result


def test_get_proc_address_answers_the_versioned_function_from_its_own_table(node: Node) -> None:
    out = ctypes_program(node, "cuMemAlloc", "cuMemGetInfo", "cuLaunchKernel", "cuNoSuchThing")
    assert out["cuMemAlloc"] == (0, 0, True)
    assert out["cuMemGetInfo"] == (0, 0, True)
    assert out["cuLaunchKernel"] == (0, 0, True)
    assert out["cuNoSuchThing"] == (500, 1, None)  # CUDA_ERROR_NOT_FOUND, SYMBOL_NOT_FOUND
    assert out["alloc"] == 0
    assert node.usage().used[node.gpus[0].uuid] == 0  # the ctypes process has exited


def test_a_variant_built_without_a_function_lacks_it_everywhere(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root, gpus = tmp_path_factory.getbasetemp(), node_gpus(1, memory=GIB)
    with simulated_node(root, gpus, omit=("cuMemAllocAsync",)) as node:
        out = ctypes_program(node, "cuMemAllocAsync", "cuMemAlloc")
    assert out["cuMemAllocAsync"] == (500, 1, None)
    assert out["cuMemAlloc"] == (0, 0, True)


def test_a_missing_config_is_one_line_naming_it_and_no_device(
    standins: Standins, tmp_path: Path
) -> None:
    env = {"VGPU_STANDIN_CONFIG": str(tmp_path / "absent"), "LD_LIBRARY_PATH": str(standins.dir)}
    done = subprocess.run(
        [str(standins.cuprobe)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.stdout.splitlines()[0] == "init 100"  # CUDA_ERROR_NO_DEVICE
    assert done.stderr.count("\n") == 1 and str(tmp_path / "absent") in done.stderr


def test_sanitized_build_runs_every_path_clean(tmp_path_factory: pytest.TempPathFactory) -> None:
    steps = [
        "alloc:1000",
        "pitch:100:10",
        "managed:64",
        "async:64",
        "pool:64",
        "vmm:2097152",
        "array:8:8",
        "array3d:4:4:4",
        "mipmap:16:16:2",
        "info",
        "spin:1000:10:5",
        "ex:1000:10:2",
        "coop:1000:10:2",
        "graph:1000:10:2",
        "freeall",
        "info",
    ]
    root, gpus = tmp_path_factory.getbasetemp(), node_gpus(1, memory=GIB)
    with simulated_node(root, gpus, sanitize=True) as node:
        started = time.monotonic()
        lines = probe(node, *steps)
    assert time.monotonic() - started < 30
    assert lines[-1][1] == str(GIB - CONTEXT_BYTES)


def test_shared_vmm_memory_outlives_its_exporter_while_an_importer_holds_it(
    node: Node, tmp_path: Path
) -> None:
    """The stand-in's model of cuMemRelease ("each time a recipient process imports a shareable
    handle, it needs to pair it with cuMemRelease for the handle to be freed"), with no interposer:
    the SIGKILLed exporter's memory passes to the importer and is freed when that one lets go."""
    got = bare(node, tmp_path, "fdshare", "orphan", "0", str(512 * MIB), str(128 * MIB))
    assert got["import"] == got["map"] == "0"
    assert int(got["free_let_go"]) - int(got["free_exporter_killed"]) == 512 * MIB


def test_an_exported_descriptor_keeps_its_memory_after_every_handle_was_released(
    node: Node, tmp_path: Path
) -> None:
    """cuMemRelease frees memory only when "all outstanding references to the handle (including
    its shareable counterparts)" are released: with no interposer, three allocations released
    at once but whose descriptors are kept stay allocated until the descriptors are closed, and
    an import through a kept descriptor works (taking nothing more)."""
    got = bare(node, tmp_path, "vmmfds", "keep", "0", str(256 * MIB), "3")
    assert got["rc"] == got["import"] == got["map"] == "0"
    assert got["free_imported"] == got["free_released"] == got["free_kept"]
    assert int(got["free_closed"]) - int(got["free_kept"]) == 3 * 256 * MIB


def test_a_descriptor_handed_to_another_process_keeps_the_memory_after_its_exporter_exits(
    node: Node, tmp_path: Path
) -> None:
    got = bare(node, tmp_path, "vmmfds", "handoff", "0", str(512 * MIB), str(128 * MIB))
    assert got["exporter"] == got["other"] == "0"
    assert int(got["free_closed"]) - int(got["free_exporter_gone"]) == 512 * MIB


@pytest.mark.parametrize("how", ["free", "freeasync", "kill"])
def test_ipc_memory_outlives_its_exporters_free_while_an_importer_holds_it_open(
    node: Node, tmp_path: Path, how: str
) -> None:
    """The stand-in's model of legacy IPC, with no interposer: the same context opening a handle
    again gets the same pointer and one reference more; the exporter's free before the importer's
    close (undefined in the reference) or its death leaves the memory allocated until the last
    close."""
    got = bare(node, tmp_path, "ipcshare", "pair", "0", str(512 * MIB), str(128 * MIB), how)
    assert got["open"] == got["reopen"] == "0" and got["same"] == "1"
    assert got["free_closed_once"] == got["free_exporter_gone"]  # one reference still open
    assert int(got["free_closed"]) - int(got["free_exporter_gone"]) == 512 * MIB


def bare(node: Node, tmp_path: Path, name: str, *args: str) -> dict[str, str]:
    """Builds programs/NAME.c against the stand-in and runs it with no interposer: its last value
    printed under each name."""
    program = tmp_path / name
    source = Path(__file__).parent / "programs" / f"{name}.c"
    link = [f"-L{node.built.dir}", "-l:libcuda.so.1"]
    subprocess.run(["cc", "-O1", "-o", str(program), str(source), *link], check=True)
    done = subprocess.run(
        [str(program), *args],
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(line.split() for line in done.stdout.splitlines())
