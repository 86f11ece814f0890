"""Throughput of the real kube-scheduler with the vgpu extender in its loop.

    python bench/real_scheduler_bench.py [--nodes 500,1000] [--pods 300]

Real etcd, kube-apiserver and kube-scheduler (hack/testcluster, the shipped
kube-scheduler-config.yaml) and the vgpu extender; N Node objects with 8 fake A100s each
(capacity, a Ready condition and the `vgpu.io/gpu-inventory` annotation, no kubelets, as KWOK
would), half full: even nodes hold one pod with four whole GPUs, odd nodes one pod with eight
50-core containers. For each N it creates the same sequence of pods asking 50 cores and
prints pods/s from the first creation to the last binding:
  * with the extender, `percentageOfNodesToScore` unset (kube-scheduler's adaptive default);
  * with the extender, `percentageOfNodesToScore: 100`;
  * without the extender (kube-scheduler alone counting vgpu.io/cores as an extended resource).
The admission policy is not installed (the fill pods are created bound, as admin). Needs Go and
the machine to itself for figures worth comparing; nothing is asserted.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realk8s import pods
from tests.realk8s.binary import build
from tests.realk8s.cluster import RealCluster
from tests.realk8s.rest import Rest
from vgpu.api.assignment import ADMITTED, binding_annotations
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare
from vgpu.node.inventory import InventoryGpu, NodeGpuInventory, encode_inventory

Obj = dict[str, Any]
GPU_MIB = 81920
GPUS = 8


def _node(name: str) -> tuple[Obj, Obj]:
    inventory = NodeGpuInventory(
        256,
        tuple(
            InventoryGpu(f"GPU-{name}-{i}", i, "NVIDIA A100-SXM4-80GB", GPU_MIB, 100, True, 0, ())
            for i in range(GPUS)
        ),
    )
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "vgpu.io/enabled": "true"},
            "annotations": {"vgpu.io/gpu-inventory": encode_inventory(inventory)},
        },
    }
    capacity = {
        "cpu": "64",
        "memory": "256Gi",
        "pods": "110",
        "vgpu.io/cores": str(100 * GPUS),
        "vgpu.io/memory": str(GPUS * GPU_MIB // 256),
    }
    status = {
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        }
    }
    return node, status


def _fill_pod(index: int, name: str, key: bytes) -> Obj:
    """The pod that makes node `name` half full, bound, with its signed assignment."""
    if index % 2 == 0:
        shares = tuple(GpuShare(GpuUUID(f"GPU-{name}-{g}"), 100, GPU_MIB * 1000) for g in range(4))
        specs = [pods.container("main", 400)]
        assigned = (ContainerAssignment("main", shares),)
    else:
        specs = [pods.container(f"c{g}", 50) for g in range(GPUS)]
        assigned = tuple(
            ContainerAssignment(f"c{g}", (GpuShare(GpuUUID(f"GPU-{name}-{g}"), 50, 0),))
            for g in range(GPUS)
        )
    pod = pods.pod(f"fill-{index:05d}", *specs)
    pod["spec"]["nodeName"] = name
    assignment = Assignment(PodKey(f"default/fill-{index:05d}"), NodeName(name), 0, 0, assigned)
    pod["metadata"]["annotations"] = {**binding_annotations(assignment, key), ADMITTED: "true"}
    return pod


def _populate(admin: Rest, count: int, key: bytes) -> None:
    def one(i: int) -> None:
        name = f"node-{i:05d}"
        node, status = _node(name)
        admin.post("/api/v1/nodes", node)
        admin.merge_patch(f"/api/v1/nodes/{name}/status", status)
        # The API server's TaintNodesByCondition adds not-ready at creation; no node lifecycle
        # controller runs to lift it.
        admin.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        admin.post(pods.PODS, _fill_pod(i, name, key))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))


def _bound(admin: Rest, prefix: str) -> int:
    items = admin.get(pods.PODS + "?fieldSelector=spec.nodeName%21%3D")["items"]
    return sum(1 for p in items if p["metadata"]["name"].startswith(prefix))


def _run(cluster: RealCluster, label: str, count: int, timeout: float) -> float:
    admin = cluster.admin
    prefix = f"bench-{label}-"
    batch = [pods.pod(f"{prefix}{i:04d}", pods.container("main", 50)) for i in range(count)]
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: admin.post(pods.PODS, p), batch))
    created = time.monotonic() - started
    done = 0
    while time.monotonic() - started < timeout:
        done = _bound(admin, prefix)
        if done >= count:
            break
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    print(
        f"  {label:<28} {done}/{count} bound in {elapsed:6.1f}s "
        f"(created in {created:.1f}s): {done / elapsed:6.1f} pods/s",
        flush=True,
    )
    now = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    for p in batch:
        admin.request("DELETE", f"{pods.PODS}/{p['metadata']['name']}", now)
    return done / elapsed


def _without_extender(config: Obj) -> None:
    config.pop("extenders", None)


def _all_nodes(config: Obj) -> None:
    config["percentageOfNodesToScore"] = 100


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", default="500,1000", help="comma-separated node counts")
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    binary, seconds = build()
    print(f"hack/testcluster built in {seconds:.1f}s")
    for count in [int(n) for n in args.nodes.split(",")]:
        root = Path(tempfile.mkdtemp(prefix="vkb-"))
        cluster = RealCluster(root, binary, [], admission_policy=False)
        try:
            cluster.up()
            began = time.monotonic()
            _populate(cluster.admin, count, cluster.key_file.read_text().encode())
            print(
                f"{count} nodes x {GPUS} GPUs, half full (set up in {time.monotonic() - began:.0f}s)"
            )
            time.sleep(5)  # the extender's watch catches up with the fill
            _run(cluster, "extender-default-pct", args.pods, args.timeout)
            cluster.start_scheduler(edit=_all_nodes)
            _run(cluster, "extender-pct-100", args.pods, args.timeout)
            cluster.start_scheduler(edit=_without_extender)
            _run(cluster, "no-extender-default-pct", args.pods, args.timeout)
        finally:
            cluster.down()
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
