"""The grant comes from the agent's read-only limits file alone: the pod's environment, `env -i`
and a read-only root change nothing, GPUs are matched by UUID whatever the initialisation order,
and a missing or bad file fails closed with one line on stderr."""

from __future__ import annotations

import pytest

from tests.isolation.conftest import MIB, Cluster
from tests.isolation.test_memory_grant import codes

NVML = ["python3", "-m", "tests.isolation.programs.nvml_memory"]


@pytest.mark.parametrize("order", ["cuda-first", "nvml-first"])
def test_a_two_gpu_grant_limits_each_gpu_whatever_the_initialisation_order(
    cluster: Cluster, order: str
) -> None:
    container = cluster.admit([(0, 30, 2048), (1, 30, 2048)])
    args = [*NVML, "alloc", str(1500 * MIB)]
    done = cluster.sandbox.run(container, [*args, "cuda-first"] if order == "cuda-first" else args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for uuid in cluster.uuids:
        assert f"{uuid} total {2048 * MIB}" in lines
    for dev in (0, 1):  # 1,500 MiB fits each GPU's 2,048 once, never twice
        assert [line for line in lines if line.startswith(f"cuda {dev} ")] == [
            f"cuda {dev} rc 0",
            f"cuda {dev} rc 2",
        ]


POD_ENV = {
    "LD_PRELOAD": "",
    "CUDA_DEVICE_MEMORY_LIMIT_0": "4g",
    "CUDA_DEVICE_SM_LIMIT": "100",
    "VGPU_MEMORY_LIMIT_BYTES": str(4 << 30),
    "VGPU_MEMORY_LIMIT_MIB": "4096",
}


@pytest.mark.parametrize("how", ["pod-env", "env-i", "read-only-tmp"])
def test_pod_overrides_env_i_and_a_read_only_root_change_nothing(
    cluster: Cluster, how: str
) -> None:
    container = cluster.admit([(0, 30, 512)])
    command = [str(cluster.build.cuload), "alloc", "0", "mem", str(256 * MIB), "3"]
    if how == "env-i":
        command = ["env", "-i", *command]
    done = cluster.sandbox.run(
        container,
        command,
        env=POD_ENV if how == "pod-env" else None,
        writable_tmp=how != "read-only-tmp",
    )
    assert codes(done.stdout) == [0, 0, 2], done.stdout + done.stderr


BAD_FILES = {
    "missing": None,
    "unknown-version": "vgpu-limits 2\n",
    "no-devices": "vgpu-limits 1\n",
    "bad-field": "vgpu-limits 1\ndevice {uuid} memory=1x cores=30 limit=30 allowance=30\n",
    "out-of-range": "vgpu-limits 1\ndevice {uuid} memory=1 cores=30 limit=20 allowance=30\n",
    "trailing": "vgpu-limits 1\ndevice {uuid} memory=1 cores=30 limit=30 allowance=30 x=1\n",
    "no-newline": "vgpu-limits 1\ndevice {uuid} memory=1 cores=30 limit=30 allowance=30",
    "duplicate": "vgpu-limits 1\n" + "device {uuid} memory=1 cores=30 limit=30 allowance=30\n" * 2,
    "scale-too-small": "vgpu-limits 1\ndevice {uuid} memory=1 cores=30 limit=30 allowance=30 "
    "scale=999\n",
    "scale-too-large": "vgpu-limits 1\ndevice {uuid} memory=1 cores=30 limit=30 allowance=30 "
    "scale=8001\n",
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_missing_or_bad_limits_file_fails_closed_with_one_stderr_line(
    cluster: Cluster, case: str
) -> None:
    container = cluster.admit([(0, 30, 512)])
    text = BAD_FILES[case]
    if text is None:
        (container.limits_dir / "limits").unlink()
    else:
        container.write_limits(text.format(uuid=cluster.uuids[0]))
    done = cluster.cuload(container, "alloc", "0", "mem", str(MIB), "1")
    assert done.stdout.strip() == "cuInit 800"  # CUDA_ERROR_NOT_PERMITTED, nothing allocated
    lines = [line for line in done.stderr.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("vgpu-core: /run/vgpu/limits: "), lines
    nvml = cluster.sandbox.run(container, NVML)
    assert "nvmlInit_v2 4" in nvml.stdout or "cuInit 800" in nvml.stdout, nvml.stdout


def test_an_unreadable_limits_file_fails_closed(cluster: Cluster) -> None:
    container = cluster.admit([(0, 30, 512)])
    (container.limits_dir / "limits").unlink()
    (container.limits_dir / "limits").mkdir()  # opens, but cannot be read
    done = cluster.cuload(container, "info")
    assert done.stdout.strip() == "cuInit 800"
    assert "vgpu-core: /run/vgpu/limits: cannot read" in done.stderr
