"""hack/gpu-check.sh's real-GPU programs (`programs/gpuspin.c`, `programs/gpumem.c`) in each mode
the script runs, on the stand-in driver, so what the script checks on hardware is exercised in CI:
memory held by a VMM mapping after its handle's release and by a graph memory node is refused past
the grant, the total a CUDA program is told is the grant however it reaches the driver, and the
cores throttle holds after `cuDevicePrimaryCtxReset` and for the fixed-work kernel. The stand-in
gives a PTX kernel its default 1 us per block, so the shares are checked against the same program
with no limit rather than against exact figures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.isolation.conftest import GIB, MIB, PROGRAMS, ROOT, Build, Cluster
from tests.isolation.standins import Node, node_gpus
from tests.isolation.test_cores_share import busy_ns

OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY


def program(c: Cluster, name: str) -> Path:
    """The program built against the cluster's stand-in driver, next to cuload (a path the sandbox
    shows), with the flags hack/gpu-check.sh uses."""
    out = c.build.cuload.parent / name
    if not out.exists():
        flags = ["-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(PROGRAMS / f"{name}.c")]
        subprocess.run(["cc", *flags, f"-L{c.build.standins.dir}", "-l:libcuda.so.1"], check=True)
    return out


def run(c: Cluster, cores: int, memory_mib: int, name: str, *args: str) -> dict[str, Any]:
    done = c.sandbox.run(c.admit([(0, cores, memory_mib)]), [str(program(c, name)), *args])
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_vmm_memory_mapped_after_its_release_refuses_a_second_allocation_past_the_grant(
    cluster: Cluster,
) -> None:
    got = run(cluster, 30, 1024, "gpumem", "vmm", str(768 * MIB))
    assert got["second"] == OUT_OF_MEMORY, got
    assert got["after_unmap"] == 0, got  # unmapped, the first is really freed


def test_a_graph_memory_node_past_the_grant_is_refused_beside_one_that_fits(
    cluster: Cluster,
) -> None:
    got = run(cluster, 30, 1024, "gpumem", "graph", str(768 * MIB))
    assert got["codes"] == [0, OUT_OF_MEMORY], got


def test_a_captured_cumemallocasync_past_the_grant_is_refused_at_capture(
    cluster: Cluster,
) -> None:
    got = run(cluster, 30, 1024, "gpumem", "capture", str(768 * MIB))
    assert got["codes"] == [0, OUT_OF_MEMORY], got
    assert got["end"] == 0, got  # the refusal leaves the capture intact


def test_shared_vmm_memory_an_importer_holds_after_its_exporter_let_go_stays_counted(
    cluster: Cluster,
) -> None:
    got = run(cluster, 30, 1024, "gpumem", "share", str(768 * MIB))
    assert got["regular"] == got["distinct"] == 1, got  # the stand-in's descriptors: files
    assert got["import"] == got["map"] == 0, got  # joined, not counted a second time
    assert got["while_held"] == OUT_OF_MEMORY, got
    assert got["after_let_go"] == 0, got


def test_a_vmm_descriptor_kept_after_every_release_keeps_its_memory_counted(
    cluster: Cluster,
) -> None:
    got = run(cluster, 30, 1024, "gpumem", "keep", str(768 * MIB))
    assert got["regular"] == 1, got  # the stand-in's descriptors: files of their own
    assert got["while_kept"] == OUT_OF_MEMORY, got
    assert got["free_kept"] == 256 * MIB, got
    assert got["free_closed"] == 1024 * MIB, got
    assert got["after_close"] == 0, got


def test_legacy_ipc_memory_an_importer_holds_after_its_exporter_freed_it_stays_counted(
    cluster: Cluster,
) -> None:
    got = run(cluster, 30, 1024, "gpumem", "ipc", str(768 * MIB))
    assert got["open"] == got["range"] == got["free"] == 0, got
    assert got["size"] == 768 * MIB, got  # the opened range is the whole allocation
    assert got["ordinal"] == 0, got  # on the GPU that holds it
    assert got["while_held"] == OUT_OF_MEMORY, got
    assert got["after_close"] == 0, got
    assert got["free_after_free"] == got["free_before_free"] == 256 * MIB, got
    assert got["free_after_close"] == 1024 * MIB, got


def test_context_limits_past_the_grant_are_refused_and_a_raised_stack_is_charged(
    cluster: Cluster,
) -> None:
    got = run(cluster, 30, 1024, "gpumem", "limits", str(2 * GIB))
    assert got["heap"] == OUT_OF_MEMORY, got
    assert got["stack"] == 0 and got["stack_took"] > 0, got  # charged to the grant
    assert got["free_restored"] == got["free_before"], got  # lowered back: given back


def test_the_total_a_cuda_program_reads_is_the_grant_directly_and_by_proc_address(
    cluster: Cluster,
) -> None:
    got = run(cluster, 30, 1024, "gpumem", "total")
    grant = 1024 * MIB
    assert got["total_mem"] == got["total_mem_by_proc_address"] == got["mem_info_total"] == grant
    assert got["mem_info_free"] <= grant


def share(c: Cluster, cores: int, *args: str, settle_s: float = 0) -> float:
    """Percent of GPU 0 gpuspin kept busy over its run, in a container of `cores`. With no limit
    these modes keep the stand-in's GPU about 96 % busy, so a throttle that turned off shows."""
    got = run(c, cores, 256, "gpuspin", *args)
    return 100 * busy_ns(c, c.uuids[0]) / ((float(got["window_s"]) + settle_s) * 1e9)


def test_the_throttle_holds_after_a_primary_context_reset(timing_cluster: Cluster) -> None:
    throttled = share(timing_cluster, 30, "reset", "2", "1000")
    assert throttled <= 35, throttled


def test_the_throttle_holds_the_fixed_work_kernel_counted_after_settling(
    timing_cluster: Cluster,
) -> None:
    throttled = share(timing_cluster, 30, "work", "2", "1000", "1", settle_s=1)
    assert throttled <= 35, throttled


def test_paced_launches_under_a_half_limit_are_not_held_back_and_their_cost_is_reported(
    timing_cluster: Cluster,
) -> None:
    """The launch-cost check's runs: under a 50 % limit as many launches go through as without
    one (the pace keeps the GPU a few percent busy), so its CPU figure is the launch's own."""
    bare = run(timing_cluster, 100, 256, "gpuspin", "pace", "1", "1", "50")
    limited = run(timing_cluster, 50, 256, "gpuspin", "pace", "1", "1", "50")
    assert limited["kernels"] >= 0.8 * bare["kernels"] > 0, (bare, limited)
    assert limited["launch_cpu_ns"] > 0 and bare["launch_cpu_ns"] > 0, (bare, limited)


def test_the_gpu_check_script_parses() -> None:
    """The script itself runs only on a GPU; here bash reads it (and shellcheck, where present)."""
    script = str(ROOT / "hack/gpu-check.sh")
    subprocess.run(["bash", "-n", script], check=True)
    if shutil.which("shellcheck") is not None:
        subprocess.run(["shellcheck", script], check=True)


def run_gpu_check(
    build: Build, tmp_path: Path, extra: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """hack/gpu-check.sh's vgpu-core section on the stand-in driver (a fake nvidia-smi names its
    GPU and -lcuda finds it): the run, and the JSON report it wrote (asserted written)."""
    node = Node(build.standins, node_gpus(1, memory=4 * GIB), dir=tmp_path / "node")
    (tmp_path / "bin").mkdir()
    smi = tmp_path / "bin/nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho {node.gpus[0].uuid}\n")
    smi.chmod(0o755)
    (tmp_path / "libcuda.so").symlink_to(build.standins.libcuda)
    out = tmp_path / "gpu-check.json"
    env = node.env(
        {
            "PATH": f"{tmp_path / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "LIBRARY_PATH": str(tmp_path),
            "PYTHON": sys.executable,
            "VGPU_CHECK_SECONDS": "1",
            "VGPU_CHECK_SETTLE_SECONDS": "1",
            "VGPU_CHECK_OUT": str(out),
            "VGPU_CHECK_VGPU_CORE_ONLY": "1",
            **(extra or {}),
        }
    )
    done = subprocess.run(
        ["bash", str(ROOT / "hack/gpu-check.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1) and out.exists(), done.stdout + done.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return done, report


@pytest.mark.skipif(os.geteuid() != 0, reason="the script makes its containers with unshare -m")
def test_the_gpu_check_scripts_vgpu_core_section_reports_every_check_on_the_stand_in(
    plain_build: Build, tmp_path: Path
) -> None:
    """The script's own flow (containers laid out as the agent's, the agent's duty started and
    stopped, the JSON report) on the stand-in driver. The memory checks hold as on a GPU; the
    stand-in's 1 us PTX kernels leave the shares meaningless, so only their presence is
    checked."""
    _, report = run_gpu_check(plain_build, tmp_path)
    checks = {c["check"]: c for c in report["checks"]}
    for name in (
        "memory grant exact",
        "VMM: released but mapped memory refuses a second create past the grant",
        "graph memory node past the grant refused",
        "captured cuMemAllocAsync past the grant refused at capture",
        "VMM shared: an importer holding it after the exporter let go keeps it counted",
        "VMM: a descriptor kept after every release keeps the memory counted",
        "legacy IPC: memory an importer holds open after the exporter's free stays counted",
        "totalGlobalMem's source (cuDeviceTotalMem_v2) and cuMemGetInfo_v2 = grant",
        "cuCtxSetLimit: a heap past the grant refused, a raised stack charged",
    ):
        assert checks[name]["pass"], checks[name]
    agent = "30 and 70 side by side, with the agent's outer loop: each within 5 points"
    assert len(checks[agent]["shares"]) == 2, checks  # the agent came up and the pair ran
    assert len(report["pair_30_70_without_agent"]) == 2, report
    assert "30 cores after cuDevicePrimaryCtxReset within 8 points" in checks
    streams = checks["30 cores on eight streams at once within 8 points"]
    assert "share" in streams, streams  # both runs reported (no driver error)
    # the stand-in's 1 us PTX kernels cannot tell a charged burst from one never charged
    # (tests/isolation/test_launch_paths.py does, with its own kernels): the calls must work
    green = checks["30 cores in green contexts destroyed after each burst within 8 points"]
    assert "share" in green, green
    paced = checks["CPU per launch under a 50 % cores limit: at most 1 us more than bare"]
    assert "added_ns" in paced, paced  # both runs reported; the stand-in's figure is its own


@pytest.mark.skipif(os.geteuid() != 0, reason="the script makes its containers with unshare -m")
def test_the_gpu_check_script_reports_every_check_when_the_driver_cannot_jit_its_ptx(
    plain_build: Build, tmp_path: Path
) -> None:
    """On the first GPU it meets, a program of the script may stop on a driver error: here the
    driver's JIT rejects the hand-written PTX (CUDA_ERROR_INVALID_PTX), so every kernel check's
    program stops at cuModuleLoadData. The script still finishes and writes its JSON: the checks
    that need no kernel pass, each kernel check fails naming the call, and the run fails. (It
    stopped at the first such program under `set -e`, and its report crashed on a program's
    error report, leaving no JSON at all.)"""
    done, report = run_gpu_check(plain_build, tmp_path, {"VGPU_STANDIN_FAIL_PTX": "1"})
    assert done.returncode == 1 and report["pass"] is False, done.stdout + done.stderr
    checks = {c["check"]: c for c in report["checks"]}
    for name in (
        "memory grant exact",
        "VMM: released but mapped memory refuses a second create past the grant",
        "graph memory node past the grant refused",
        "totalGlobalMem's source (cuDeviceTotalMem_v2) and cuMemGetInfo_v2 = grant",
    ):
        assert checks[name]["pass"], checks[name]
    for name in (
        "overhead <= 2 %",
        "cores 25 within 8 points",
        "cores 50 within 8 points",
        "cores 75 within 8 points",
        "30 and 60 side by side at 0.5 +- 0.1",
        "graph captured under 30 cores, launched within 8 points",
        "30 cores after cuDevicePrimaryCtxReset within 8 points",
        "30 cores on eight streams at once within 8 points",
        "30 and 70 side by side, with the agent's outer loop: each within 5 points",
    ):
        assert checks[name]["pass"] is False, checks[name]
        errors = checks[name]["errors"].values()
        assert any(e.get("error") == "cuModuleLoadData" for e in errors), checks[name]


def test_the_driver_check_reports_not_available_on_a_driver_before_615(tmp_path: Path) -> None:
    """hack/gpu-check-driver.sh on a node without the driver's memory limits says so, with the
    driver, kernel and cgroup version, and succeeds (gpu-check then goes on); bash and, where
    present, shellcheck read it too."""
    script = str(ROOT / "hack/gpu-check-driver.sh")
    subprocess.run(["bash", "-n", script], check=True)
    if shutil.which("shellcheck") is not None:
        subprocess.run(["shellcheck", script], check=True)
    (tmp_path / "bin").mkdir()
    smi = tmp_path / "bin/nvidia-smi"
    smi.write_text("#!/bin/sh\necho 580.95.05\n")
    smi.chmod(0o755)
    out = tmp_path / "driver.json"
    env = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "VGPU_CHECK_DRIVER_OUT": str(out),
    }
    done = subprocess.run(
        ["bash", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = json.loads(out.read_text())["driver_backend"]
    assert line.startswith("not available: driver 580.95.05, kernel "), line
    assert line.endswith(("cgroup v1", "cgroup v2")), line


def _driver_check(tmp_path: Path, smi_answers: dict[str, str]) -> dict[str, str]:
    """Run hack/gpu-check-driver.sh with an nvidia-smi answering `smi_answers` (the value of
    its --query-gpu) and a cgroup v2 file system of a temporary directory; its report."""
    (tmp_path / "bin").mkdir()
    smi = tmp_path / "bin/nvidia-smi"
    cases = "".join(f'    *"{query}"*) echo {answer} ;;\n' for query, answer in smi_answers.items())
    smi.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}    *) echo ;;\nesac\n')
    smi.chmod(0o755)
    cgroupfs = tmp_path / "cgroup"
    cgroupfs.mkdir()
    (cgroupfs / "cgroup.controllers").write_text("cpu memory dmem\n")
    out = tmp_path / "driver.json"
    env = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHON": sys.executable,
        "VGPU_CHECK_DRIVER_OUT": str(out),
        "VGPU_CHECK_CGROUPFS": str(cgroupfs),
    }
    script = str(ROOT / "hack/gpu-check-driver.sh")
    done = subprocess.run(
        ["bash", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, str] = json.loads(out.read_text())
    return report


def test_the_driver_check_reports_a_mig_gpu_as_not_available_and_why(tmp_path: Path) -> None:
    """An r615+ driver on cgroup v2 whose GPU 0 is in MIG mode: the driver's limits do not apply
    to MIG instances (NVML reference), so the check says so instead of failing."""
    report = _driver_check(tmp_path, {"driver_version": "620.10", "mig.mode": "Enabled"})
    line = report["driver_backend"]
    assert line.startswith("not available: driver 620.10, kernel "), line
    assert line.endswith(
        "cgroup v2: GPU 0 is in MIG mode (the driver's limits do not apply to MIG instances)"
    ), line


def test_the_driver_check_reports_an_nvml_without_the_limit_functions_as_not_available(
    tmp_path: Path,
) -> None:
    """An r615+ driver whose NVML cannot give nvmlDeviceSetMemoryLimits_v1 (here no NVML at
    all): the check says why, as the agent's start-up line would, and gpu-check goes on."""
    report = _driver_check(tmp_path, {"driver_version": "620.10", "mig.mode": "Disabled"})
    line = report["driver_backend"]
    assert line.startswith("not available: driver 620.10, kernel "), line
    assert "cgroup v2: cannot load libnvidia-ml.so.1" in line, line
