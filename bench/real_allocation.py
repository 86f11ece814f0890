"""Allocation reached by the real kube-scheduler with the extender, and by `vgpu simulate`, on the
same pod sequence and node shapes (`python bench/real_scheduler_bench.py --scenario allocation`).

The pods are the GPU pods of the embedded Alibaba trace (openb) that fit one node, in a seeded
order, until their GPU request is `tune` times the cluster's GPUs; they are written to a pod CSV
and the nodes (N × 8 GPUs, 96 CPUs, 384 GiB: the trace's most common 8-GPU node) to a node CSV. `vgpu simulate` replays those files;
the real run creates the same pods in the simulator's arrival order (`vgpu.sim.workload`), one at
a time: each is bound (then marked admitted, as the node agent would) or found unschedulable by
kube-scheduler (then deleted, as the simulator drops it), before the next. Both are measured by
the simulator's rule (`vgpu.sim.engine.Tally`): allocated GPU as % of capacity, at 100 % arrived
and at the end.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from random import Random
from typing import Any

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.rest import Rest
from vgpu.api.assignment import ADMITTED
from vgpu.cli.trace_files import embedded, read_trace
from vgpu.core.model import PodRequest
from vgpu.sim.engine import RunResult, Tally, capacity_milli
from vgpu.sim.workload import arrivals

Obj = dict[str, Any]
GPUS, CPU_MILLI, MEMORY_MIB = 8, 96000, 393216  # the trace's most common 8-GPU node


def write_trace(directory: Path, nodes: int, tune: float, seed: int) -> tuple[Path, Path]:
    """The node CSV and the pod CSV of one comparison."""
    nodes_csv, pods_csv = directory / "nodes.csv", directory / "pods.csv"
    with nodes_csv.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        for i in range(nodes):
            writer.writerow([f"node-{i:05d}", CPU_MILLI, MEMORY_MIB, GPUS, "G2"])
    with embedded("openb_pod_list_default.csv").open(newline="") as source:
        rows = [
            r
            for r in csv.DictReader(source)
            if 1 <= int(r["num_gpu"]) <= GPUS
            and int(r["cpu_milli"]) <= CPU_MILLI
            and int(r["memory_mib"]) <= MEMORY_MIB
        ]
    Random(seed).shuffle(rows)
    target, total, chosen = tune * nodes * GPUS * 1000, 0, []
    for row in rows:
        if total >= target:
            break
        chosen.append(row)
        total += int(row["num_gpu"]) * int(row["gpu_milli"])
    with pods_csv.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"])
        for row in chosen:
            writer.writerow(
                [row[k] for k in ("name", "cpu_milli", "memory_mib")]
                + [row["num_gpu"], row["gpu_milli"]]
            )
    return nodes_csv, pods_csv


def simulate(nodes_csv: Path, pods_csv: Path, tune: float, seed: int) -> Obj:
    """`vgpu simulate` on the files, policy `default` (the extender's default): its run."""
    argv = [
        sys.executable,
        "-m",
        "vgpu",
        "simulate",
        f"--nodes={nodes_csv}",
        f"--pods={pods_csv}",
        "--policy=default",
        f"--seeds={seed}",
        f"--tune={tune}",
        "--json",
        "--quiet",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
    run: Obj = json.loads(done.stdout)["policies"]["default"]["runs"][0]
    return run


def _manifest(name: str, pod: PodRequest) -> Obj:
    (gpu,) = pod.gpu_containers
    main = pods.container("main")
    main["resources"] = {
        "requests": {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"},
        "limits": {"vgpu.io/cores": str(gpu.cores)},
    }
    return pods.pod(name, main)


def _outcome(admin: Rest, name: str, timeout: float) -> bool:
    """True once the pod is bound (and marked admitted), False once kube-scheduler found it
    unschedulable (then it is deleted)."""
    path = f"{pods.PODS}/{name}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = admin.get(path)
        if pod["spec"].get("nodeName"):
            admin.merge_patch(path, {"metadata": {"annotations": {ADMITTED: '["main"]'}}})
            return True
        conditions = pod.get("status", {}).get("conditions", [])
        if any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
        ):
            now = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
            admin.request("DELETE", path, now)
            return False
        time.sleep(0.02)
    raise TimeoutError(f"pod {name}: neither bound nor unschedulable after {timeout:.0f}s")


def real_run(cluster: RealCluster, sequence: list[PodRequest], capacity: int) -> RunResult:
    """The sequence through the real kube-scheduler and the extender, one pod at a time."""
    tally = Tally("real", 0, capacity)
    arrived = used = placed = failed = 0
    for i, pod in enumerate(sequence):
        name = f"alloc-{i:05d}"
        cluster.admin.post(pods.PODS, _manifest(name, pod))
        arrived += pod.gpu_milli
        if _outcome(cluster.admin, name, 60):
            used += pod.gpu_milli
            placed += 1
        else:
            failed += 1
        tally.record(arrived, used)
    return tally.result(used, placed, failed)


def compare(
    cluster: RealCluster,
    directory: Path,
    nodes: int,
    *,
    tune: float,
    seed: int,
    populate: Callable[[int], None],
) -> None:
    """Print the simulator's and the real run's allocation on the same pods."""
    nodes_csv, pods_csv = write_trace(directory, nodes, tune, seed)
    trace = read_trace(nodes_csv, pods_csv)
    capacity = capacity_milli(trace.nodes)
    sequence = arrivals(trace.pods, capacity_milli=capacity, tune=tune, seed=seed)
    sim = simulate(nodes_csv, pods_csv, tune, seed)
    populate(nodes)
    cluster.start_scheduler()
    began = time.monotonic()
    real = real_run(cluster, sequence, capacity)
    print(
        f"{nodes} nodes x {GPUS} GPUs, {len(sequence)} trace pods (seed {seed}, tune {tune}):\n"
        f"  vgpu simulate --policy default: at 100 % arrived {sim['alloc_pct_at_100']} %, "
        f"final {sim['alloc_pct_final']} % ({sim['pods_placed']} placed, "
        f"{sim['pods_failed']} failed)\n"
        f"  real kube-scheduler + extender: at 100 % arrived {real.alloc_pct_at_100} %, "
        f"final {real.alloc_pct_final} % ({real.pods_placed} placed, {real.pods_failed} "
        f"failed; {time.monotonic() - began:.0f}s)",
        flush=True,
    )
