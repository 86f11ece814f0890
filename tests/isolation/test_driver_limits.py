"""The driver memory backend end to end on the simulated node: the agent's PreStart hook sets
the pod's hard limit through the stand-in NVML (`nvmlDeviceSetMemoryLimits_v1`), and a program
of the pod's container, run with no interposer at all (no LD_PRELOAD, no /etc/ld.so.preload: a
"static" program as far as enforcement goes), is refused past it by the stand-in driver.

The container's cgroup is what /proc/self/cgroup says inside the sandbox (a file bound over it);
the cgroup v2 tree is a fake one in the node's directory (`dmem.capacity`, the pod directories).
"""

from __future__ import annotations

import ast
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.isolation.conftest import ROOT, Cluster
from tests.isolation.sandbox import Container, Sandbox
from tests.isolation.standins import write_config
from vgpu.node.driver_limits import dmem_region
from vgpu.node.grants import ContainerGrant

MIB = 1 << 20
UID = "5f0c1a2e-0000-4000-8000-00000000d1ff"
POD = f"/kubepods/burstable/pod{UID}"
OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY

HOOK = r"""
import sys
from dataclasses import replace
from pathlib import Path
from vgpu.adapters.dmem import NvmlLimits
from vgpu.agent.driver_limits import DriverLimitHook
from vgpu.core.kubelet_reuse import Role
from vgpu.core.model import GpuShare
from vgpu.node.devices import ResourceNames
uid, gpu, mib, cgroupfs = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
pod = (uid, [(Role.APP, (GpuShare(gpu, 10, mib * 1000),))])
nvml = NvmlLimits()
hook = DriverLimitHook(lambda kind, ids: [pod], nvml, ResourceNames(), cgroupfs=cgroupfs)
hook("vgpu.io/memory", [gpu + "::m0"])
cgroup = next(p for p in cgroupfs.rglob("pod" + uid) if p.is_dir())
print(repr(nvml.get(gpu, cgroup)))
"""


class DriverNode:
    """A cluster whose driver limits memory per cgroup, over a fake cgroup v2 tree."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        node = cluster.node
        self.cgroupfs = node.dir / "cgroupfs"
        self.cgroupfs.mkdir()
        (self.cgroupfs / "cgroup.controllers").write_text("cpu io memory pids dmem\n")
        regions = [f"{dmem_region(g.pci)} {g.memory}" for g in node.gpus]
        (self.cgroupfs / "dmem.capacity").write_text("\n".join(regions) + "\n")
        write_config(node.config, node.gpus, state=node.dir / "state", cgroupfs=self.cgroupfs)
        build = cluster.build
        self.sandbox = Sandbox(node, build.ld_cache, env_base=dict(cluster.sandbox.env_base))
        self.container = Container(ContainerGrant())  # no interposer, no preload file

    def cgroup(self, path: str) -> Path:
        """Make the cgroup directory `path` (as the kubelet and the runtime would)."""
        (self.cgroupfs / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
        return self.cgroupfs / path.lstrip("/")

    def _child_env(self) -> dict[str, str]:
        """A Python child's environment: the stand-in NVML, this checkout, ASan's runtime."""
        env = self.cluster.node.env({"PYTHONPATH": str(ROOT)})
        if self.cluster.build.asan_runtime:
            env["LD_PRELOAD"] = self.cluster.build.asan_runtime
        return env

    def child(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`program` in a Python child that loads the stand-in NVML (and this checkout)."""
        return subprocess.run(
            [sys.executable, "-c", program, *args],
            env=self._child_env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    @contextlib.contextmanager
    def serve(self, program: str, *args: str) -> Iterator[subprocess.Popen[str]]:
        """`program` in a running child as `child` makes it, its stdin and stdout piped; the
        child is told to end by closing its stdin."""
        argv = [sys.executable, "-c", program, *args]
        with subprocess.Popen(
            argv,
            env=self._child_env(),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as proc:
            try:
                yield proc
            finally:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=30)

    def pre_start(self, mib: int, gpu: int = 0) -> tuple[int, int, int]:
        """The agent's PreStart hook for the pod on GPU `gpu`; returns what NVML reads back
        (soft, hard, used)."""
        uuid = self.cluster.node.gpus[gpu].uuid
        done = self.child(HOOK, UID, uuid, str(mib), str(self.cgroupfs))
        assert done.returncode == 0, done.stderr
        soft, hard, used = ast.literal_eval(done.stdout.strip().splitlines()[-1])
        return soft, hard, used

    def argv(self, cgroup: str, *steps: str) -> list[str]:
        """The sandbox command running `cuprobe` as a process of `cgroup`: a file saying so is
        bound over /proc/self/cgroup (bwrap execs the program in the process it set up)."""
        self.cgroup(cgroup)
        marker = self.cluster.node.dir / f"cgroup-{cgroup.replace('/', '_')}"
        marker.write_text(f"0::{cgroup}\n")
        probe = str(self.cluster.node.built.cuprobe)
        argv = self.sandbox.argv(self.container, [probe, *steps])
        at = argv.index("/dev") + 1  # after the fresh /proc and /dev
        argv[at:at] = ["--ro-bind", str(marker), "/proc/self/cgroup"]
        return argv

    def run(self, cgroup: str, *steps: str) -> list[str]:
        """`cuprobe` run to its end as a process of `cgroup`; its output lines."""
        argv = self.argv(cgroup, *steps)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout.splitlines()


@pytest.fixture
def driver(cluster: Cluster) -> DriverNode:
    return DriverNode(cluster)


def rc_of(lines: list[str], step: str) -> int:
    """The CUresult cuprobe printed for `step` (`alloc:N` prints `alloc N RC`)."""
    printed = step.replace(":", " ") + " "
    return int(next(line for line in lines if line.startswith(printed)).split()[-1])


def test_an_allocation_past_the_pods_hard_limit_fails_without_the_interposer(
    driver: DriverNode,
) -> None:
    driver.cgroup(POD)
    soft, hard, used = driver.pre_start(1024)
    assert (soft, hard, used) == (0, 1024 * MIB, 0)
    steps = (f"alloc:{800 * MIB}", f"alloc:{200 * MIB}")
    inside = driver.run(f"{POD}/ctr1", *steps)
    assert rc_of(inside, steps[0]) == 0
    assert rc_of(inside, steps[1]) == OOM  # 64 MiB context + 800 + 200 > 1024 MiB
    outside = driver.run(f"/kubepods/burstable/pod{UID[:-1]}0/ctr1", *steps)
    assert [rc_of(outside, s) for s in steps] == [0, 0]


def test_the_limit_is_the_pods_across_its_containers(driver: DriverNode) -> None:
    driver.cgroup(POD)
    driver.pre_start(1024)
    argv = driver.argv(f"{POD}/ctr1", f"alloc:{600 * MIB}", "hold")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert any(line.startswith("holding") for line in proc.stdout)
        second = driver.run(f"{POD}/ctr2", f"alloc:{300 * MIB}")
        assert rc_of(second, f"alloc:{300 * MIB}") == OOM  # 664 + 64 + 300 > 1024
    finally:
        proc.kill()
        proc.wait()


def test_limits_are_set_again_when_a_container_restarts(driver: DriverNode) -> None:
    pod = driver.cgroup(POD)
    driver.pre_start(512)
    (pod / "dmem.max").unlink()  # the limit is gone (the pod cgroup was re-created)
    step = f"alloc:{600 * MIB}"
    assert rc_of(driver.run(f"{POD}/ctr1", step), step) == 0
    driver.pre_start(512)  # the kubelet's PreStart for the restarted container
    assert rc_of(driver.run(f"{POD}/ctr1", step), step) == OOM


NVML_CASES = r"""
import sys
from dataclasses import replace
from pathlib import Path
from vgpu.adapters.dmem import LIMIT_MAX, LimitError, NvmlLimits
gpu, mig_gpu, pod, root = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
nvml = NvmlLimits()
def code(call):
    try:
        call()
        return 0
    except LimitError as e:
        return int(str(e).rsplit("code ", 1)[1].rstrip(")"))
out = {"mig": code(lambda: nvml.set(mig_gpu, pod, hard=1 << 30))}
out["root"] = code(lambda: nvml.set(gpu, root, hard=1 << 30))
out["absent"] = code(lambda: nvml.set(gpu, pod / "absent", hard=1 << 30))
out["unset"] = nvml.get(gpu, pod)
nvml.set(gpu, pod, hard=5 << 20, soft=3 << 20)
out["set"] = nvml.get(gpu, pod)
nvml.set(gpu, pod, hard=LIMIT_MAX, soft=0)
out["cleared"] = nvml.get(gpu, pod)
print(repr(out))
"""


def test_the_standin_nvml_limits_behave_as_documented(driver: DriverNode) -> None:
    """MIG handles are not supported; the root cgroup takes no limit (the kernel's dmem
    controller has no dmem.max there); "no limit" reads as soft 0, hard
    NVML_DEVICE_MEMORY_LIMIT_MAX; clearing writes exactly that."""
    node = driver.cluster.node
    gpus = [node.gpus[0], replace(node.gpus[1], mig="on")]
    write_config(node.config, gpus, state=node.dir / "state", cgroupfs=driver.cgroupfs)
    pod = driver.cgroup(POD)
    done = driver.child(NVML_CASES, gpus[0].uuid, gpus[1].uuid, str(pod), str(driver.cgroupfs))
    assert done.returncode == 0, done.stderr
    out = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    not_supported, not_found, unlimited = 3, 6, (1 << 64) - 1
    assert (out["mig"], out["root"], out["absent"]) == (not_supported, not_supported, not_found)
    assert out["unset"] == (0, unlimited, 0)
    assert out["set"] == (3 << 20, 5 << 20, 0)
    assert out["cleared"] == (0, unlimited, 0)
    assert f"{dmem_region(gpus[0].pci)} max" in (pod / "dmem.max").read_text()


def test_a_limit_the_driver_refuses_fails_the_prestart_with_its_cause(driver: DriverNode) -> None:
    node = driver.cluster.node
    gpus = [node.gpus[0], replace(node.gpus[1], mig="on")]
    write_config(node.config, gpus, state=node.dir / "state", cgroupfs=driver.cgroupfs)
    driver.cgroup(POD)
    done = driver.child(HOOK, UID, gpus[1].uuid, "1024", str(driver.cgroupfs))
    assert done.returncode != 0
    assert "PreStartRefused" in done.stderr
    assert f"memory limit of {1024 * MIB} bytes on GPU {gpus[1].uuid}" in done.stderr
    assert "Not Supported (code 3)" in done.stderr
