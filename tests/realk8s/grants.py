"""What a bound pod was granted (its signed assignment) and what its containers were given (the
environment the kubelet passed to the runtime), side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.realk8s.cluster import RealCluster
from tests.realk8s.rest import Obj
from vgpu.api.assignment import ASSIGNMENT, decode
from vgpu.core.units import MMIB_PER_MIB


def granted(pod: Obj) -> dict[str, dict[str, str]]:
    """Per container, the variables its assignment implies: visible GPUs, cores, memory MiB."""
    assignment = decode(pod["metadata"]["annotations"][ASSIGNMENT])
    expected: dict[str, dict[str, str]] = {}
    for entry in assignment.containers:
        shares = sorted(entry.shares, key=lambda s: s.uuid)
        expected[entry.name] = {
            "GPUS": ",".join(s.uuid for s in shares),
            "VGPU_CORES": ",".join(str(s.cores) for s in shares),
            "VGPU_MEMORY_LIMIT_MIB": ",".join(str(s.memory_mmib // MMIB_PER_MIB) for s in shares),
        }
    return expected


def given(cluster: RealCluster, pod: str, container: str) -> dict[str, str]:
    """The same variables as the kubelet handed them to the runtime (GPUs in sorted order)."""
    record = cluster.container(pod, container)
    assert record is not None, f"the kubelet created no container {pod}/{container}"
    envs: dict[str, str] = record["envs"]
    order = envs.get("CUDA_VISIBLE_DEVICES", "").split(",")
    cdi = [d["name"] for d in record.get("cdiDevices") or []]
    assert "NVIDIA_VISIBLE_DEVICES" not in envs, f"{pod}/{container}: GPUs by variable, not CDI"
    assert cdi == [f"nvidia.com/gpu={uuid}" for uuid in order if uuid], (pod, container, cdi)
    by_uuid = sorted(range(len(order)), key=lambda i: order[i])

    def reorder(name: str) -> str:
        values = envs.get(name, "").split(",")
        return (
            ",".join(values[i] for i in by_uuid)
            if len(values) == len(order)
            else envs.get(name, "")
        )

    return {
        "GPUS": ",".join(order[i] for i in by_uuid),
        "VGPU_CORES": reorder("VGPU_CORES"),
        "VGPU_MEMORY_LIMIT_MIB": reorder("VGPU_MEMORY_LIMIT_MIB"),
    }


def inspect_json(cluster: RealCluster) -> Obj:
    """`kubectl inspect vgpu -o json` as its own user (ClusterRole vgpu-inspect only)."""
    kubeconfig = Path(cluster.kubeconfig("vgpu-inspect-user"))
    done = subprocess.run(
        [sys.executable, "-m", "vgpu", "inspect", "-o", "json", f"--kubeconfig={kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report: Obj = json.loads(done.stdout)
    return report
