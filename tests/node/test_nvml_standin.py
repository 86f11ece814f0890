"""The node agent's NVML path (`NvmlBackend` over `pynvml`) against the stand-in
libnvidia-ml.so.1: discovery, usage, XID health, and a driver that lacks functions.

pynvml loads `libnvidia-ml.so.1` by name (`CDLL`), so the backend runs in a child process
whose `LD_LIBRARY_PATH` holds the stand-in: this test process never loads any NVML.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from tests.isolation.standin_node import holding, python_child, run_python, simulated_node, with_xid
from tests.isolation.standins import CONTEXT_BYTES, GIB, Node, StandinGpu, gcc_available, gpu_uuid

pytestmark = pytest.mark.skipif(not gcc_available(), reason="needs gcc")

A, B = gpu_uuid("agent", 0), gpu_uuid("agent", 1)
GPUS = [
    StandinGpu(A, 16 * GIB, "00000000:3B:00.0", numa=0, mig="off", peers=(B,), name="Tesla T4"),
    StandinGpu(B, 40 * GIB, "00000000:5E:00.0", numa=1, mig="on", peers=(A,), name="A100"),
]

BACKEND_PROGRAM = r"""
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
from vgpu.adapters.gpu import NvmlBackend
backend = NvmlBackend()
inv = backend.inventory()
out = {"driver": inv.driver_version, "cuda": inv.cuda_version,
       "gpus": [(g.uuid, g.index, g.model, g.memory_mib, g.pci_bus_id, g.numa_node,
                 g.nvlink_peers, g.compute_capability, g.mig_enabled) for g in inv.gpus],
       "usage": [(u.gpu_uuid, u.pid, u.used_bytes) for u in backend.process_usage()],
       "stats": [(s.gpu_uuid, s.memory_used_bytes, s.utilization_ratio)
                 for s in backend.gpu_stats()]}
if "xid" in sys.argv:
    backend.wait_xid(0)  # registers the event set
    print("registered", flush=True)
    sys.stdin.readline()
    out["xid"] = [(e.xid, e.gpu_uuid) for e in backend.wait_xid(5)]
backend.close()
print(repr(out))
"""


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    with simulated_node(tmp_path_factory.getbasetemp(), GPUS) as node:
        yield node


def test_discovery_reads_every_gpu_fact_through_nvml(node: Node) -> None:
    out, err = run_python(node, BACKEND_PROGRAM)
    assert (out["driver"], out["cuda"]) == ("550.54.15", "12.4")
    assert out["gpus"] == [
        (A, 0, "Tesla T4", 16 * 1024, "00000000:3B:00.0", 0, (B,), (7, 5), False),
        (B, 1, "A100", 40 * 1024, "00000000:5E:00.0", 1, (A,), (7, 5), True),
    ]
    assert "WARNING" not in err


def test_usage_is_what_the_cuda_side_holds(node: Node) -> None:
    with holding(node, "alloc:5000000") as holder:
        out, _ = run_python(node, BACKEND_PROGRAM)
    used = 5000000 + CONTEXT_BYTES
    assert out["usage"] == [(A, holder.pid, used)]
    assert out["stats"] == [(A, used, 0.0), (B, 0, 0.0)]


def test_a_graphics_context_process_s_memory_is_in_the_usage(node: Node) -> None:
    """A program on the GPU through OpenGL or Vulkan (llama.cpp's Vulkan backend, headless EGL)
    never calls libcuda, and NVML lists it only with nvmlDeviceGetGraphicsRunningProcesses: the
    usage the watchdog sees must hold it, or its memory goes unaccounted."""
    with holding(node, "alloc:5000000", env={"VGPU_STANDIN_CONTEXT": "graphics"}) as holder:
        out, _ = run_python(node, BACKEND_PROGRAM)
    used = 5000000 + CONTEXT_BYTES
    assert out["usage"] == [(A, holder.pid, used)]
    assert out["stats"] == [(A, used, 0.0), (B, 0, 0.0)]


def test_a_process_with_compute_and_graphics_contexts_is_reported_once_per_gpu(
    node: Node,
) -> None:
    """NVML lists it in both lists, each time with all the memory it uses: once, not twice."""
    steps = ("alloc:5000000", "dev:1", "alloc:7000000")
    with holding(node, *steps, env={"VGPU_STANDIN_CONTEXT": "compute+graphics"}) as holder:
        out, _ = run_python(node, BACKEND_PROGRAM)
    assert sorted(out["usage"]) == [
        (A, holder.pid, 5000000 + CONTEXT_BYTES),
        (B, holder.pid, 7000000 + CONTEXT_BYTES),
    ]


def test_an_injected_xid_is_reported_for_its_gpu(node: Node) -> None:
    out, _ = with_xid(node, python_child(node, BACKEND_PROGRAM, "xid", stdin=True), B, 48)
    assert out["xid"] == [(48, B)]


@pytest.fixture
def old_driver_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    lacking = ("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetMigMode")
    with simulated_node(tmp_path_factory.getbasetemp(), GPUS, omit=lacking) as node:
        yield node


def test_a_function_an_older_driver_lacks_degrades_with_one_log_line(
    old_driver_node: Node,
) -> None:
    out, err = run_python(old_driver_node, BACKEND_PROGRAM)
    assert [g[0] for g in out["gpus"]] == [A, B]
    assert [(g[4], g[5], g[8]) for g in out["gpus"]] == [("", None, False)] * 2
    assert [g[6] for g in out["gpus"]] == [(B,), (A,)]  # what the driver has still works
    warnings = [line for line in err.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 3, err
    for name in ("nvmlDeviceGetPciInfo", "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetMigMode"):
        assert sum(name in w for w in warnings) == 1, err


AGENT_PROGRAM = r"""
import sys
from tests.node.agent_harness import CORES, make_box
from vgpu.adapters.gpu import NvmlBackend
boxes = make_box()
box = next(boxes)
box.start_agent(backend=NvmlBackend())  # as on a GPU node: discovery through NVML
def health():
    by_gpu = {}
    for device, state in box.kubelet.devices(CORES).items():
        by_gpu.setdefault(device.split("::")[0], set()).add(state)
    return {gpu: sorted(states) for gpu, states in by_gpu.items()}
print(repr(health()), flush=True)
sys.stdin.readline()
box.kubelet.wait_for(lambda: len(health().get(sys.argv[1], ())) == 1
                     and health()[sys.argv[1]] == ["Unhealthy"], timeout=10)
print(repr(health()), flush=True)
boxes.close()
"""


def test_the_agent_on_a_gpu_node_offers_nvml_gpus_and_an_xid_makes_one_unhealthy(
    node: Node,
) -> None:
    agent = python_child(node, AGENT_PROGRAM, B, stdin=True)
    assert agent.stdout is not None and agent.stdin is not None
    first = agent.stdout.readline()
    assert first, agent.communicate(timeout=30)[1]
    assert ast.literal_eval(first) == {A: ["Healthy"], B: ["Healthy"]}
    node.inject_xid(B, 79)  # "GPU has fallen off the bus": not an application XID
    agent.stdin.write("\n")
    agent.stdin.flush()
    out, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err
    assert ast.literal_eval(out) == {A: ["Healthy"], B: ["Unhealthy"]}


WATCHDOG_PROGRAM = r"""
import sys
from tests.node.agent_harness import make_box
from tests.node.usage_scenario import FakeCgroups, cgroup_v2, run_pod
from tests.waiting import holds_within
from vgpu.adapters.gpu import NvmlBackend
from vgpu.node.watchdog import WatchdogPolicy
pid, cid = int(sys.argv[1]), "feed" + "2" * 60
class Killer:  # records, and the process leaves the container (it is not signalled)
    killed = []
    def kill(self, pid):
        self.killed.append(pid)
        cgroups.files.pop(pid, None)
boxes = make_box()
box = next(boxes)
backend = NvmlBackend()
box.gpus = [g.uuid for g in backend.inventory().gpus]  # the pod's GPU is the node's first
cgroups, killer = FakeCgroups(), Killer()
agent = box.start_agent(backend=backend, cgroups=cgroups, killer=killer, watchdog_s=0.05,
                        watchdog=WatchdogPolicy(kill=True))
box.place("a", [("main", 30, 1)], {"main": [(0, 30)]})  # a grant of 1 GiB
uid = run_pod(box, "a", {"main": cid})
assert holds_within(lambda: len(agent.containers) == 1)
cgroups.files[pid] = cgroup_v2(uid, cid)  # the graphics process is the container's
holds_within(lambda: killer.killed, timeout=20)
holds_within(lambda: box.events("VgpuProcessKilled"))
holds_within(lambda: box.events("VgpuMemoryOverGrant"))  # recorded apart from the kill's
print(repr({"killed": killer.killed,
            "over": [e["message"] for e in box.events("VgpuMemoryOverGrant")],
            "stopped": [e["message"] for e in box.events("VgpuProcessKilled")]}))
boxes.close()
"""


def test_the_watchdog_stops_a_graphics_process_past_its_containers_grant(node: Node) -> None:
    """The watchdog is the backstop for memory the interposer never sees, and a Vulkan or
    OpenGL program's memory is such memory: 2 GiB of it in a container granted 1 GiB."""
    env = {"VGPU_STANDIN_CONTEXT": "graphics"}
    with holding(node, f"alloc:{2 * GIB}", env=env) as holder:
        out, err = run_python(node, WATCHDOG_PROGRAM, str(holder.pid))
    assert out["killed"] == [holder.pid], err
    [over] = out["over"]
    assert A in over and str(holder.pid) in over
    [stopped] = out["stopped"]
    assert f"stopped process(es) {holder.pid}" in stopped
