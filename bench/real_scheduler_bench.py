"""Throughput of the real kube-scheduler with the vgpu extender in its loop.

    python bench/real_scheduler_bench.py [--nodes 500,1000] [--pods 300]

Real etcd, kube-apiserver and kube-scheduler (hack/testcluster, the shipped
kube-scheduler-config.yaml) and the vgpu extender; N Node objects with 8 fake A100s each
(capacity, a Ready condition and the `vgpu.io/gpu-inventory` annotation, no kubelets, as KWOK
would), half full: even nodes hold one pod with four whole GPUs, odd nodes one pod with eight
50-core containers. For each N it creates the same sequence of pods asking 50 cores,
created while kube-scheduler is stopped; it then starts kube-scheduler and prints pods/s from its
first binding to its last (timestamps from its own log):
  * with the extender as shipped (`--filter-best 1`, no prioritize), `percentageOfNodesToScore`
    unset (kube-scheduler's adaptive default), and with `percentageOfNodesToScore: 100`;
  * with the extender's filter passing every node that fits and prioritize called
    (`--filter-best 0`, the extender restarted with it), `percentageOfNodesToScore: 100`;
  * without the extender (kube-scheduler alone counting vgpu.io/cores as an extended resource),
    with both settings.
Last, for each variant with the extender, what it adds to kube-scheduler's scheduling-algorithm
time per pod over kube-scheduler alone with the same percentageOfNodesToScore.
The admission policy is not installed (the fill pods are created bound, as admin). Needs Go and
the machine to itself for figures worth comparing; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import real_metrics
from tests.realk8s import pods
from tests.realk8s.binary import build
from tests.realk8s.cluster import RealCluster
from tests.realk8s.rest import Rest
from vgpu.api.assignment import ADMITTED, binding_annotations
from vgpu.api.inventory import InventoryGpu, NodeGpuInventory, encode_inventory
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare

Obj = dict[str, Any]
Edit = Callable[[Obj], None]
GPU_MIB = 81920
GPUS = 8


def _node(name: str, cpu: str = "64", memory: str = "256Gi") -> tuple[Obj, Obj]:
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
        "cpu": cpu,
        "memory": memory,
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


def _fill_pod(index: int, name: str) -> tuple[Obj, tuple[ContainerAssignment, ...]]:
    """The pod that makes node `name` half full (bound to it) and what its assignment holds."""
    if index % 2 == 0:
        shares = tuple(GpuShare(GpuUUID(f"GPU-{name}-{g}"), 100, GPU_MIB * 1000) for g in range(4))
        specs = [pods.container("main", 400)]
        assigned: tuple[ContainerAssignment, ...] = (ContainerAssignment("main", shares),)
    else:
        specs = [pods.container(f"c{g}", 50) for g in range(GPUS)]
        assigned = tuple(
            ContainerAssignment(f"c{g}", (GpuShare(GpuUUID(f"GPU-{name}-{g}"), 50, 0),))
            for g in range(GPUS)
        )
    pod = pods.pod(f"fill-{name}", *specs)
    pod["spec"]["nodeName"] = name
    return pod, assigned


Fill = Callable[[int, str], tuple[Obj, tuple[ContainerAssignment, ...]] | None]


def _fragmented_fill(count: int) -> Fill:
    """Every GPU of every node half used, except one node left empty: a whole-GPU pod fits on
    that node alone, while kube-scheduler's own filters pass every node (400 cores free each)."""

    def fill(index: int, name: str) -> tuple[Obj, tuple[ContainerAssignment, ...]] | None:
        return None if index == count * 7 // 10 else _fill_pod(2 * index + 1, name)

    return fill


def _populate(
    admin: Rest,
    count: int,
    key: bytes,
    fill: Fill = _fill_pod,
    shape: tuple[str, str] = ("64", "256Gi"),
) -> None:
    def one(i: int) -> None:
        name = f"node-{i:05d}"
        node, status = _node(name, *shape)
        admin.post("/api/v1/nodes", node)
        admin.merge_patch(f"/api/v1/nodes/{name}/status", status)
        # The API server's TaintNodesByCondition adds not-ready at creation
        # (plugin/pkg/admission/nodetaint/admission.go); no node lifecycle controller lifts it.
        admin.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        filled = fill(i, name)
        if filled is None:
            return
        pod, assigned = filled
        uid = admin.post(pods.PODS, pod)["metadata"]["uid"]
        assignment = Assignment(PodKey(f"default/fill-{name}"), NodeName(name), 0, 0, assigned, uid)
        notes = {**binding_annotations(assignment, key), ADMITTED: "true"}
        admin.merge_patch(f"{pods.PODS}/fill-{name}", {"metadata": {"annotations": notes}})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))


MINE = {"vgpu-bench": "1"}  # the measured pods: polled by label, never the 1,000s of fill pods


def _bound(admin: Rest, prefix: str) -> int:
    """How many pods named `prefix*` are bound; each newly bound one is marked admitted, as the
    node agent would once the kubelet admits it (no kubelets run here, and the hand-off keeps a
    second pod of the same shape waiting on a node until the first is admitted)."""
    query = "?labelSelector=vgpu-bench%3D1&fieldSelector=spec.nodeName%21%3D"
    items = admin.get(pods.PODS + query)["items"]
    mine = [p for p in items if p["metadata"]["name"].startswith(prefix)]
    for pod in mine:
        if ADMITTED not in pod["metadata"].get("annotations", {}):
            names = json.dumps([c["name"] for c in pod["spec"]["containers"]])
            patch = {"metadata": {"annotations": {ADMITTED: names}}}
            admin.merge_patch(f"{pods.PODS}/{pod['metadata']['name']}", patch)
    return len(mine)


BOUND = re.compile(
    r'^I\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*"Successfully bound pod to node" pod="default/(\S+)"'
)


def _binding_times(log: Path, prefix: str) -> list[float]:
    """Seconds of day at which kube-scheduler logged each binding of a pod named `prefix*`."""
    times = []
    for line in log.read_text(errors="replace").splitlines():
        match = BOUND.match(line)
        if match and match.group(4).startswith(prefix):
            h, m, sec = match.groups()[:3]
            times.append(int(h) * 3600 + int(m) * 60 + float(sec))
    return sorted(times)


def _run(cluster: RealCluster, label: str, count: int, timeout: float, edit: Edit) -> None:
    """Create the pods with kube-scheduler stopped, start it, and time its bindings (from its
    log: first to last binding), so the rate is the scheduler's and not the client's."""
    admin = cluster.admin
    prefix = f"bench-{label}-"
    cluster.procs.stop("kube-scheduler")
    batch = [
        pods.pod(f"{prefix}{i:04d}", pods.container("main", 50), labels=MINE) for i in range(count)
    ]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: admin.post(pods.PODS, p), batch))
    extender_url = f"https://127.0.0.1:{cluster.ports['extender']}/metrics"
    before = real_metrics.scrape(extender_url, cluster.pki, verify=True)
    started = time.monotonic()
    cluster.start_scheduler(edit=edit)
    cpu_before = _cpu(cluster)
    done = 0
    while time.monotonic() - started < timeout:
        done = _bound(admin, prefix)
        if done >= count:
            break
        time.sleep(0.1)
    times = _binding_times(cluster.procs.log("kube-scheduler"), prefix)
    span = times[-1] - times[0] if len(times) > 1 else float("nan")
    rate = (len(times) - 1) / span if len(times) > 1 and span > 0 else float("nan")
    print(
        f"  {label:<24} {done}/{count} bound; first to last binding {span:6.2f}s: "
        f"{rate:6.1f} pods/s",
        flush=True,
    )
    after = real_metrics.scrape(extender_url, cluster.pki, verify=True)
    scheduler_url = f"https://127.0.0.1:{cluster.ports['scheduler']}/metrics"
    after.update(real_metrics.scrape(scheduler_url, cluster.pki, verify=False))
    print(f"    per call: {real_metrics.report(before, after)}", flush=True)
    ALGORITHM_MS[label] = real_metrics.algorithm_ms(before, after)
    cpu = real_metrics.cpu_report(cpu_before, _cpu(cluster), count)
    print(f"    CPU ms per pod (scheduler start to last bind): {cpu}", flush=True)
    now = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda p: admin.request("DELETE", f"{pods.PODS}/{p['metadata']['name']}", now),
                batch,
            )
        )


COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "extender-0")
ALGORITHM_MS: dict[str, float | None] = {}
"""kube-scheduler's scheduling-algorithm ms per pod of each variant run (for `_added`)."""


def _added() -> None:
    """What the extender adds to kube-scheduler's time per pod, against kube-scheduler alone
    in the same cluster (the issue's measure), for each pair of variants that ran."""
    for scored in ("pct-100", "default-pct"):
        alone = ALGORITHM_MS.get(f"no-extender-{scored}")
        for label, ms in ALGORITHM_MS.items():
            if alone and ms and label.startswith("extender") and label.endswith(scored):
                print(
                    f"  {label}: +{100 * (ms / alone - 1):.0f} % per pod over kube-scheduler alone"
                )


def _cpu(cluster: RealCluster) -> dict[str, float]:
    children = cluster.procs.children
    return {n: real_metrics.cpu_seconds(children[n].pid) for n in COMPONENTS if n in children}


def _sample_run(cluster: RealCluster, label: str, timeout: float, edit: Edit) -> None:
    """Eight trials of one whole-GPU pod that only the one empty node can take (the pod is
    deleted after binding): how long each takes to bind and how many scheduling attempts failed
    on the way, i.e. how often kube-scheduler's node sample missed the node that fits."""
    admin = cluster.admin
    prefix = f"sample-{label}-"
    cluster.start_scheduler(edit=edit)
    waits = []
    now = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    for trial in range(GPUS):
        name = f"{prefix}{trial}"
        started = time.monotonic()
        admin.post(pods.PODS, pods.pod(name, pods.container("main", 100), labels=MINE))
        while time.monotonic() - started < timeout and not _bound(admin, name):
            time.sleep(0.05)
        waits.append(time.monotonic() - started)
        admin.request("DELETE", f"{pods.PODS}/{name}", now)
        time.sleep(1)  # the extender sees the GPU free again
    log = cluster.procs.log("kube-scheduler").read_text(errors="replace")
    failed = sum(
        1 for line in log.splitlines() if "Unable to schedule pod" in line and prefix in line
    )
    print(
        f"  {label:<24} {len(waits)} trials: time to bind median {statistics.median(waits):.1f}s, "
        f"max {max(waits):.1f}s; {failed} failed attempts in all",
        flush=True,
    )


def _kube_default(config: Obj) -> None:
    config.pop("percentageOfNodesToScore", None)


def _without_extender(config: Obj) -> None:
    config.pop("extenders", None)
    _kube_default(config)


def _all_nodes(config: Obj) -> None:
    config["percentageOfNodesToScore"] = 100


def _no_extender_all_nodes(config: Obj) -> None:
    _without_extender(config)
    _all_nodes(config)


def _prioritize_all_nodes(config: Obj) -> None:
    """Before --filter-best: filter passes every node that fits, prioritize scores them."""
    _all_nodes(config)
    for extender in config["extenders"]:
        extender.update({"prioritizeVerb": "prioritize", "weight": 5})


FILTER_ALL = ("--filter-best=0",)
VARIANTS: dict[str, tuple[Edit, tuple[str, ...]]] = {
    "extender-default-pct": (_kube_default, ()),
    "extender-pct-100": (_all_nodes, ()),
    "extender-prioritize-pct-100": (_prioritize_all_nodes, FILTER_ALL),
    "no-extender-default-pct": (_without_extender, ()),
    "no-extender-pct-100": (_no_extender_all_nodes, ()),
}
"""Each variant: its edit of the shipped scheduler configuration and the extender's flags."""


def _restart_extender(cluster: RealCluster, flags: tuple[str, ...], profile: Path | None) -> None:
    """The extender again with these flags, once its watch has caught up."""
    cluster.procs.stop("extender-0", grace=30)
    cluster.start_extender("extender-0", None, *flags, profile=profile)
    time.sleep(5)


def _with_qps(edit: Edit, qps: float) -> Edit:
    def edited(config: Obj) -> None:
        edit(config)
        if qps:
            config["clientConnection"].update({"qps": qps, "burst": int(2 * qps)})

    return edited


def _allocation(cluster: RealCluster, root: Path, count: int, tune: float, seed: int) -> None:
    from bench.real_allocation import CPU_MILLI, MEMORY_MIB, compare

    key = cluster.key_file.read_text().encode()
    cluster.procs.stop("kube-scheduler")

    def populate(nodes: int) -> None:
        shape = (f"{CPU_MILLI}m", f"{MEMORY_MIB}Mi")
        _populate(cluster.admin, nodes, key, lambda _i, _name: None, shape)
        time.sleep(5)  # the extender's watch sees every node

    compare(cluster, root, count, tune=tune, seed=seed, populate=populate)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", default="500,1000", help="comma-separated node counts")
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--qps",
        type=float,
        default=0,
        help="kube-scheduler's clientConnection qps (burst twice that); 0 keeps the default 50",
    )
    parser.add_argument(
        "--scenario",
        choices=["throughput", "sample", "allocation"],
        default="throughput",
        help="sample: all nodes fragmented but one; does kube-scheduler's sample find it? "
        "allocation: trace pods on empty nodes, against `vgpu simulate` (bench/real_allocation.py)",
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="throughput: which of " + ", ".join(VARIANTS)
    )
    parser.add_argument(
        "--profile-extender",
        type=Path,
        help="run the extender under cProfile; print its top functions at the end",
    )
    parser.add_argument("--seed", type=int, default=42, help="allocation: the pods' order")
    parser.add_argument("--tune", type=float, default=1.3, help="allocation: arrivals x capacity")
    args = parser.parse_args()
    binary, seconds = build()
    print(f"hack/testcluster built in {seconds:.1f}s")
    for count in [int(n) for n in args.nodes.split(",")]:
        root = Path(tempfile.mkdtemp(prefix="vkb-"))
        cluster = RealCluster(root, binary, [], admission_policy=False)
        try:
            cluster.up()
            if args.scenario == "allocation":
                _allocation(cluster, root, count, args.tune, args.seed)
                continue
            began = time.monotonic()
            sample = args.scenario == "sample"
            fill = _fragmented_fill(count) if sample else _fill_pod
            _populate(cluster.admin, count, cluster.key_file.read_text().encode(), fill)
            shape = "every GPU half used but one node's" if sample else "half full"
            print(
                f"{count} nodes x {GPUS} GPUs, {shape} (set up in {time.monotonic() - began:.0f}s)"
            )
            time.sleep(5)  # the extender's watch catches up with the fill
            flags: tuple[str, ...] = ()
            if args.profile_extender:
                _restart_extender(cluster, flags, args.profile_extender)
            for label, (edit, wanted) in VARIANTS.items():
                if label not in args.variants.split(","):
                    continue
                if wanted != flags and not label.startswith("no-extender"):
                    flags = wanted
                    _restart_extender(cluster, flags, args.profile_extender)
                if sample and label.startswith("extender"):
                    _sample_run(cluster, label, args.timeout, _with_qps(edit, args.qps))
                elif not sample:
                    _run(cluster, label, args.pods, args.timeout, _with_qps(edit, args.qps))
            _added()
            ALGORITHM_MS.clear()
            if args.profile_extender:
                cluster.procs.stop("extender-0", grace=30)
                real_metrics.print_profile(args.profile_extender)
        finally:
            cluster.down()
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
