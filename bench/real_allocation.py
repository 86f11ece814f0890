"""Allocation reached by the real kube-scheduler with the extender, by kube-scheduler's own DRA
allocator over vgpu's DRA driver's ResourceSlices, and by `vgpu simulate`, on the same pod
sequence and node shapes (`python bench/real_scheduler_bench.py --scenario allocation`).

The pods are the GPU pods of the embedded Alibaba trace (openb) that fit one node, in a seeded
order, until their GPU request is `tune` times the cluster's GPUs; they are written to a pod CSV
and the nodes (N × 8 GPUs, 96 CPUs, 384 GiB: the trace's most common 8-GPU node) to a node CSV. `vgpu simulate` replays those files;
the real run creates the same pods in the simulator's arrival order (`vgpu.sim.workload`), one at
a time: each is bound (then marked admitted, as the node agent would) or found unschedulable by
kube-scheduler (then deleted, as the simulator drops it), before the next. That is done twice
on the same nodes: through the extender (vgpu.io/cores), then, the extender's pods deleted,
through DRA (kube-scheduler without the extender; each pod's claim made by the resource-claim
controller from a ResourceClaimTemplate per shape: a share asks `cores` and its proportional
memory rounded down to a memory unit, so cores alone decide what fits, as for the extender; whole
GPUs ask `count` devices at their full capacity), over each node's ResourceSlice as the driver
builds it in the chart's default (index) order. All are measured by the simulator's rule
(`vgpu.sim.engine.Tally`): allocated GPU (the placed pods' GPU milli, cores and memory alike) as %
of capacity, at 100 % arrived and at the end; the real runs also at the first refusal.
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

from bench.real_sched import dra
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


Manifest = Callable[[str, PodRequest], Obj]


def _claim_manifest(admin: Rest) -> Manifest:
    """Pods asking their GPU through a ResourceClaimTemplate of their shape (made once)."""
    made: set[str] = set()

    def manifest(name: str, pod: PodRequest) -> Obj:
        (gpu,) = pod.gpu_containers
        template = f"alloc-{gpu.cores}"
        if template not in made:
            dra.share_template(admin, template, gpu.cores)
            made.add(template)
        main = pods.container("main")
        main["resources"] = {
            "requests": {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
        }
        return dra.claim_pod(name, template, main)

    return manifest


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


def real_run(
    admin: Rest, sequence: list[PodRequest], capacity: int, prefix: str, manifest: Manifest
) -> tuple[RunResult, float, list[str]]:
    """The sequence through the real kube-scheduler, one pod at a time: its result, the
    allocation % when the first pod was refused (100 arrived % if none was), the pods placed."""
    tally = Tally("real", 0, capacity)
    arrived = used = failed = 0
    placed: list[str] = []
    first_refusal: float | None = None
    for i, pod in enumerate(sequence):
        name = f"{prefix}{i:05d}"
        admin.post(pods.PODS, manifest(name, pod))
        arrived += pod.gpu_milli
        if _outcome(admin, name, 60):
            used += pod.gpu_milli
            placed.append(name)
        else:
            failed += 1
            first_refusal = tally.pct(used) if first_refusal is None else first_refusal
        tally.record(arrived, used)
    result = tally.result(used, len(placed), failed)
    return result, result.alloc_pct_final if first_refusal is None else first_refusal, placed


def _clear(admin: Rest, names: list[str]) -> None:
    """Delete the placed pods and wait until they are gone (the next path starts empty)."""
    now = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    for name in names:
        admin.request("DELETE", f"{pods.PODS}/{name}", now)
    query = "?fieldSelector=spec.nodeName%21%3D"
    while any(p["metadata"]["name"] in set(names) for p in admin.get(pods.PODS + query)["items"]):
        time.sleep(1)
    time.sleep(5)  # kube-scheduler's cache sees them gone


def _line(path: str, real: RunResult, refusal: float, seconds: float) -> str:
    return (
        f"  {path}: at first refusal {refusal} %, at 100 % arrived {real.alloc_pct_at_100} %, "
        f"final {real.alloc_pct_final} % ({real.pods_placed} placed, {real.pods_failed} "
        f"failed; {seconds:.0f}s)"
    )


def compare(
    cluster: RealCluster,
    directory: Path,
    nodes: int,
    *,
    tune: float,
    seed: int,
    populate: Callable[[int], None],
    edit: Callable[[Obj], None],
) -> None:
    """Print the simulator's and both real paths' allocation on the same pods; `edit` is the
    scheduler configuration's (the DRA path also drops the extender)."""
    nodes_csv, pods_csv = write_trace(directory, nodes, tune, seed)
    trace = read_trace(nodes_csv, pods_csv)
    capacity = capacity_milli(trace.nodes)
    sequence = arrivals(trace.pods, capacity_milli=capacity, tune=tune, seed=seed)
    sim = simulate(nodes_csv, pods_csv, tune, seed)
    populate(nodes)
    print(
        f"{nodes} nodes x {GPUS} GPUs, {len(sequence)} trace pods (seed {seed}, tune {tune}):\n"
        f"  vgpu simulate --policy default: at 100 % arrived {sim['alloc_pct_at_100']} %, "
        f"final {sim['alloc_pct_final']} % ({sim['pods_placed']} placed, "
        f"{sim['pods_failed']} failed)",
        flush=True,
    )
    admin = cluster.admin
    cluster.start_scheduler(edit=edit)
    began = time.monotonic()
    real, refusal, placed = real_run(admin, sequence, capacity, "alloc-", _manifest)
    print(_line("kube-scheduler + extender", real, refusal, time.monotonic() - began), flush=True)
    _clear(admin, placed)

    def without_extender(config: Obj) -> None:
        edit(config)
        config.pop("extenders", None)

    cluster.procs.stop("kube-scheduler")
    cluster.start_scheduler(edit=without_extender)
    began = time.monotonic()
    real, refusal, _ = real_run(admin, sequence, capacity, "dra-", _claim_manifest(admin))
    print(_line("kube-scheduler DRA allocator", real, refusal, time.monotonic() - began))
