"""hack/gpu-check.sh's real-GPU programs (`programs/gpuspin.c`, `programs/gpumem.c`) in each mode
the script runs, on the stand-in driver, so what the script checks on hardware is exercised in CI:
memory held by a VMM mapping after its handle's release and by a graph memory node is refused past
the grant, the total a CUDA program is told is the grant however it reaches the driver, and the
cores throttle holds after `cuDevicePrimaryCtxReset` and for the fixed-work kernel. The stand-in
gives a PTX kernel its default 1 us per block, so the shares are checked against the same program
with no limit rather than against exact figures."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.isolation.conftest import MIB, PROGRAMS, ROOT, Cluster
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


def test_the_gpu_check_script_parses() -> None:
    """The script itself runs only on a GPU; here bash reads it (and shellcheck, where present)."""
    script = str(ROOT / "hack/gpu-check.sh")
    subprocess.run(["bash", "-n", script], check=True)
    if shutil.which("shellcheck") is not None:
        subprocess.run(["shellcheck", script], check=True)
