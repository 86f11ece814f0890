"""daemonset/samples say what they need and fit the project's own test cluster (the
gang once asked 9 CPUs of 2-CPU nodes, so `kubectl apply -k daemonset/samples/` left it Pending).

The test cluster is hack/testcluster.sh's default: two nodes of four fake A100s
(`tests.realk8s.nodes.NodeSpec`), each with the 2 CPUs of the machine it runs on. vgpu's own pods
take their CPU requests first (a node agent per node, the extender and scheduler replicas spread
over the nodes); the samples are then placed first-fit, largest first, by CPU and whole GPUs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.test_manifests import ROOT, documents
from tests.realk8s.nodes import NodeSpec
from vgpu.api.quantity import milli_ceil

SAMPLES = ROOT / "samples"
NODES = 2
NODE_CPU_MILLI = 2000
Obj = dict[str, Any]


def sample_files() -> list[Path]:
    return [SAMPLES / r for r in documents(SAMPLES / "kustomization.yaml")[0]["resources"]]


def requests_milli(obj: Obj) -> int:
    """CPU requests of a pod template or pod (requests, else limits, as the API defaults)."""
    spec = obj["spec"]["template"]["spec"] if "template" in obj["spec"] else obj["spec"]
    total = 0
    for c in spec["containers"]:
        res = c.get("resources") or {}
        cpu = (res.get("requests") or {}).get("cpu") or (res.get("limits") or {}).get("cpu")
        total += milli_ceil(cpu, c["name"]) if cpu is not None else 0
    return total


def gpus_of(pod: Obj) -> float:
    cores = sum(
        int((c["resources"].get("limits") or {}).get("vgpu.io/cores", 0))
        for c in pod["spec"]["containers"]
    )
    return cores / 100


def vgpu_daemons_milli() -> list[int]:
    """CPU requests of vgpu's own pods per node: an agent on each, the replicas spread."""
    per_node = [0] * NODES
    for name in ("node-agent.yaml", "extender.yaml", "scheduler/deployment.yaml"):
        for obj in documents(ROOT / name):
            if obj["kind"] == "DaemonSet":
                per_node = [n + requests_milli(obj) for n in per_node]
            elif obj["kind"] == "Deployment":
                for i in range(obj["spec"].get("replicas", 1)):
                    per_node[i % NODES] += requests_milli(obj)
    return per_node


def test_every_sample_says_what_it_needs() -> None:
    for path in [*sample_files(), SAMPLES / "kustomization.yaml"]:
        header = path.read_text().split("\napiVersion:", 1)[0]
        assert re.search(r"^# Needs", header, re.M), f"{path.name}: no 'Needs' line in its header"


def test_the_samples_all_fit_the_test_cluster_at_once() -> None:
    gpus_per_node = int(NodeSpec("x").gpus.split("x", 1)[0])
    free_cpu = [NODE_CPU_MILLI - used for used in vgpu_daemons_milli()]
    free_gpus = [float(gpus_per_node)] * NODES
    pods = [p for path in sample_files() for p in documents(path)]
    for pod in sorted(pods, key=lambda p: (-gpus_of(p), -requests_milli(p))):
        cpu, gpus = requests_milli(pod), gpus_of(pod)
        fits = [i for i in range(NODES) if free_cpu[i] >= cpu and free_gpus[i] >= gpus]
        assert fits, f"{pod['metadata']['name']} ({cpu}m CPU, {gpus} GPUs) fits no node"
        free_cpu[fits[0]] -= cpu
        free_gpus[fits[0]] -= gpus


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_the_header_states_the_samples_cpu_requests(path: Path) -> None:
    """The "Needs" line is kept true: its CPU figure is the file's requests."""
    total = sum(requests_milli(p) for p in documents(path))
    header = path.read_text().split("\napiVersion:", 1)[0]
    stated = re.search(r"([\d.]+) CPUs?|(\d+)m CPU", " ".join(header.split()))
    assert stated, path.name
    milli = round(float(stated.group(1)) * 1000) if stated.group(1) else int(stated.group(2))
    assert milli == total, f"{path.name}: header says {milli}m, requests are {total}m"
