"""The memory grant holds inside the container: every allocation path is counted against it, the
memory queries of CUDA and NVML report it, and the container's processes share it."""

from __future__ import annotations

import signal

import pytest

from tests.isolation.conftest import MIB, Cluster

PATHS = ["mem", "pitch", "managed", "async", "pool", "vmm", "array", "array3d", "mipmap"]


def codes(stdout: str) -> list[int]:
    return [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("rc ")]


@pytest.mark.parametrize("path", PATHS)
def test_an_allocation_past_the_grant_fails_out_of_memory_on_every_path(
    cluster: Cluster, path: str
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    done = cluster.cuload(container, "alloc", "0", path, str(256 * MIB), "5")
    assert done.returncode == 0, done.stderr
    assert codes(done.stdout) == [0, 0, 0, 0, 2]  # 4 x 256 MiB fit 1 GiB; the fifth is refused


def test_cuda_and_nvml_totals_equal_the_grant_exactly(cluster: Cluster) -> None:
    container = cluster.admit([(0, 30, 3000)])
    done = cluster.cuload(container, "info")
    device0 = done.stdout.splitlines()[0].split()
    fields = dict(zip(device0[3::2], device0[4::2], strict=False))
    assert int(fields["total"]) == 3000 * MIB
    assert int(fields["info_total"]) == 3000 * MIB
    nvml = cluster.sandbox.run(container, ["python3", "-m", "tests.isolation.programs.nvml_memory"])
    assert nvml.returncode == 0, nvml.stderr
    assert f"{cluster.uuids[0]} total {3000 * MIB}" in nvml.stdout


def test_two_processes_of_one_container_share_the_grant_and_sigkill_gives_it_back(
    cluster: Cluster,
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    holder = cluster.sandbox.popen(
        container, [str(cluster.build.cuload), "alloc", "0", "mem", str(768 * MIB), "1", "hold"]
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "rc 0"
        second = cluster.cuload(container, "alloc", "0", "mem", str(512 * MIB), "1")
        assert codes(second.stdout) == [2]  # 768 + 512 > 1024
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        third = cluster.cuload(container, "alloc", "0", "mem", str(1024 * MIB), "1")
        assert codes(third.stdout) == [0]
    finally:
        holder.kill()
        holder.wait(10)


def test_another_container_has_its_own_grant(cluster: Cluster) -> None:
    first = cluster.admit([(0, 30, 512)])
    second = cluster.admit([(0, 30, 512)])
    assert codes(cluster.cuload(first, "alloc", "0", "mem", str(512 * MIB), "1").stdout) == [0]
    assert codes(cluster.cuload(second, "alloc", "0", "mem", str(512 * MIB), "1").stdout) == [0]


def test_many_threads_allocating_and_launching_keep_the_accounting_exact(cluster: Cluster) -> None:
    container = cluster.admit([(0, 100, 64)])
    done = cluster.cuload(container, "threads", "0", "16", "50", str(8 * MIB), timeout=120)
    assert done.returncode == 0, done.stderr
    failures, free, total = (int(v) for v in done.stdout.split()[1::2])
    assert free == total == 64 * MIB  # every free gave back exactly what was counted
    assert failures < 16 * 50  # some rounds fit (8 of 16 threads at once at most)
