"""The stand-in libnvidia-ml.so.1 against the NVML reference, read through NVIDIA's own Python
binding (`pynvml`, which loads `libnvidia-ml.so.1` by name) in a child process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.isolation.standin_node import holding, python_child, run_python, simulated_node, with_xid
from tests.isolation.standins import CONTEXT_BYTES, GIB, Node, StandinGpu, gcc_available, gpu_uuid

pytestmark = pytest.mark.skipif(not gcc_available(), reason="needs gcc")

A, B, C = (gpu_uuid("nvml", i) for i in range(3))
GPUS = [
    StandinGpu(A, 2 * GIB, "00000000:3B:00.0", numa=0, mig="off", peers=(B,), name="Tesla T4"),
    StandinGpu(B, 4 * GIB, "00000000:5E:00.0", numa=1, mig="on", peers=(A,), name="A100"),
    StandinGpu(C, GIB, "00000000:86:00.0", numa=-1, mig="none", name="Tesla T4"),
]

NVML_PROGRAM = r"""
import sys, pynvml as nv
nv.nvmlInit()
out = {"driver": nv.nvmlSystemGetDriverVersion(), "cuda": nv.nvmlSystemGetCudaDriverVersion()}
handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
def call(fn, *a):
    try:
        return fn(*a)
    except nv.NVMLError as e:
        return "error %d" % e.value
for h in handles:
    mem, mem2 = nv.nvmlDeviceGetMemoryInfo(h), nv.nvmlDeviceGetMemoryInfo(h, nv.nvmlMemory_v2)
    uuid = nv.nvmlDeviceGetUUID(h)
    out[uuid] = {
        "name": nv.nvmlDeviceGetName(h), "index": nv.nvmlDeviceGetIndex(h),
        "minor": nv.nvmlDeviceGetMinorNumber(h),
        "memory": (mem.total, mem.used, mem.free), "memory2": (mem2.total, mem2.used),
        "pci": nv.nvmlDeviceGetPciInfo(h).busId,
        "by_pci": nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByPciBusId(
            nv.nvmlDeviceGetPciInfo(h).busId)),
        "by_uuid": nv.nvmlDeviceGetIndex(nv.nvmlDeviceGetHandleByUUID(uuid)),
        "numa": call(nv.nvmlDeviceGetNumaNodeId, h), "mig": call(nv.nvmlDeviceGetMigMode, h),
        "link0": call(nv.nvmlDeviceGetNvLinkState, h, 0),
        "link0_peer": call(lambda: nv.nvmlDeviceGetNvLinkRemotePciInfo(h, 0).busId),
        "nvlink": [nv.nvmlDeviceGetP2PStatus(h, o, nv.NVML_P2P_CAPS_INDEX_NVLINK) == 0
                   for o in handles],
        "procs": [(p.pid, p.usedGpuMemory) for p in nv.nvmlDeviceGetComputeRunningProcesses(h)],
        "util": nv.nvmlDeviceGetUtilizationRates(h).gpu,
        "proc_util": [(s.pid, s.smUtil) for s in call(nv.nvmlDeviceGetProcessUtilization, h, 0)]
                     if not isinstance(call(nv.nvmlDeviceGetProcessUtilization, h, 0), str)
                     else call(nv.nvmlDeviceGetProcessUtilization, h, 0),
    }
if "events" in sys.argv:
    events = nv.nvmlEventSetCreate()
    for h in handles:
        nv.nvmlDeviceRegisterEvents(h, nv.nvmlDeviceGetSupportedEventTypes(h), events)
    print("registered", flush=True)
    sys.stdin.readline()
    e = nv.nvmlEventSetWait(events, 2000)
    out["event"] = (nv.nvmlDeviceGetUUID(e.device), e.eventType, e.eventData)
    out["then"] = call(nv.nvmlEventSetWait, events, 100)
    nv.nvmlEventSetFree(events)
nv.nvmlShutdown()
print(repr(out))
"""


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    with simulated_node(tmp_path_factory.getbasetemp(), GPUS) as node:
        yield node


def nvml(node: Node) -> dict[str, Any]:
    return run_python(node, NVML_PROGRAM)[0]


def test_static_facts_are_the_configured_node(node: Node) -> None:
    out = nvml(node)
    assert (out["driver"], out["cuda"]) == ("550.54.15", 12040)
    for i, gpu in enumerate(GPUS):
        dev = out[gpu.uuid]
        assert (dev["name"], dev["index"], dev["minor"], dev["by_uuid"]) == (gpu.name, i, i, i)
        assert dev["memory"] == (gpu.memory, 0, gpu.memory)
        assert dev["memory2"] == (gpu.memory, 0)
        assert dev["pci"] == gpu.pci and dev["by_pci"] == gpu.uuid
    assert [out[g.uuid]["numa"] for g in GPUS] == [0, 1, "error 3"]  # NOT_SUPPORTED
    assert [out[g.uuid]["mig"] for g in GPUS] == [[0, 0], [1, 1], "error 3"]
    assert [out[g.uuid]["nvlink"] for g in GPUS] == [
        [False, True, False],
        [True, False, False],
        [False, False, False],
    ]
    assert out[A]["link0"] == 1 and out[A]["link0_peer"] == GPUS[1].pci
    assert out[C]["link0"] == "error 3"


def test_memory_processes_and_utilisation_follow_the_cuda_side(node: Node) -> None:
    with holding(node, "alloc:1000000", "spin:1000000:100:20") as holder:
        out = nvml(node)
    used = 1000000 + CONTEXT_BYTES
    assert out[A]["memory"] == (GPUS[0].memory, used, GPUS[0].memory - used)
    assert out[A]["procs"] == [(holder.pid, used)]
    assert out[B]["procs"] == []
    # 2 s of kernels ended just before the query started (a Python start-up ago, on a loaded
    # machine up to a few hundred ms): most of the last second was busy, all of it this pid's.
    assert 50 <= out[A]["util"] <= 100
    assert len(out[A]["proc_util"]) == 1 and out[A]["proc_util"][0][0] == holder.pid
    assert out[A]["proc_util"][0][1] == pytest.approx(out[A]["util"], abs=15)
    assert out[B]["util"] == 0 and out[B]["proc_util"] == "error 6"  # NOT_FOUND: no samples
    assert nvml(node)[A]["procs"] == []  # SIGKILL gave the memory back


def test_an_injected_xid_reaches_a_registered_event_set_once(node: Node) -> None:
    out, _ = with_xid(node, python_child(node, NVML_PROGRAM, "events", stdin=True), B, 79)
    assert out["event"] == (B, 0x8, 79)  # nvmlEventTypeXidCriticalError
    assert out["then"] == "error 10"  # NVML_ERROR_TIMEOUT: delivered once


LISTS_PROGRAM = r"""
import pynvml as nv
nv.nvmlInit()
out = {}
for i in range(nv.nvmlDeviceGetCount()):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    out[nv.nvmlDeviceGetUUID(h)] = {
        kind: [(p.pid, p.usedGpuMemory) for p in getattr(nv, fn)(h)]
        for kind, fn in (
            ("compute", "nvmlDeviceGetComputeRunningProcesses"),
            ("compute_v2", "nvmlDeviceGetComputeRunningProcesses_v2"),
            ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
            ("graphics_v2", "nvmlDeviceGetGraphicsRunningProcesses_v2"),
            ("mps", "nvmlDeviceGetMPSComputeRunningProcesses"),
            ("mps_v2", "nvmlDeviceGetMPSComputeRunningProcesses_v2"),
        )
    }
nv.nvmlShutdown()
print(repr(out))
"""


def lists(node: Node) -> dict[str, dict[str, list[tuple[int, int]]]]:
    return run_python(node, LISTS_PROGRAM)[0]


@pytest.mark.parametrize(
    ("context", "compute", "graphics"),
    [(None, True, False), ("graphics", False, True), ("compute+graphics", True, True)],
)
def test_a_process_is_in_the_lists_of_the_contexts_it_holds(
    node: Node, context: str | None, compute: bool, graphics: bool
) -> None:
    """NVML reference: the compute list holds only processes with a compute context ("Any
    graphics applications (e.g. using OpenGL, DirectX) won't be listed"), the graphics list
    those with a graphics context, each with "all of the memory used by the application"; no
    MPS server runs here, so the MPS list is empty."""
    env = None if context is None else {"VGPU_STANDIN_CONTEXT": context}
    with holding(node, "alloc:1000000", env=env) as holder:
        out = lists(node)
    held = [(holder.pid, 1000000 + CONTEXT_BYTES)]
    for version in ("", "_v2"):
        assert out[A]["compute" + version] == (held if compute else [])
        assert out[A]["graphics" + version] == (held if graphics else [])
        assert out[A]["mps" + version] == []
        for other in (B, C):
            assert out[other]["compute" + version] == out[other]["graphics" + version] == []
