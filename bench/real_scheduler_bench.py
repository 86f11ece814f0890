"""Throughput of the real kube-scheduler alone, with the vgpu extender in its loop, and with its
own DRA allocator over vgpu's DRA driver's ResourceSlices: one run, the same nodes, the same pods.

    python bench/real_scheduler_bench.py [--nodes 500,1000] [--pods 300] [--qps 200]

Real etcd, kube-apiserver and kube-scheduler (hack/testcluster, the shipped
kube-scheduler-config.yaml), the vgpu extender, and (for the DRA variants and the allocation
scenario) kube-controller-manager running the resource-claim controller alone; N Node objects
with 8 fake A100s each (bench/real_sched/fill.py: capacity, a Ready condition and the
`vgpu.io/gpu-inventory` annotation, no kubelets, as KWOK would), half full: even nodes hold four whole GPUs, odd nodes 50 cores of each GPU, as the
extender's signed assignment of a bound pod and, with DRA variants, also as an allocated
ResourceClaim of a bound pod over the node's ResourceSlice as our driver builds it
(bench/real_sched/dra.py says why claims and how). For each N it creates the same sequence of
pods asking 50 cores (the DRA variants: through a ResourceClaimTemplate; the resource-claim
controller makes their claims before the clock starts), created while kube-scheduler is stopped;
it then starts kube-scheduler and prints pods/s from its first binding to its last (timestamps
from its own log):
  * with the extender as shipped (`--filter-best 1`, no prioritize), `percentageOfNodesToScore`
    unset (kube-scheduler's adaptive default), and with `percentageOfNodesToScore: 100`;
  * with the extender's filter passing every node that fits and prioritize called
    (`--filter-best 0`, the extender restarted with it), `percentageOfNodesToScore: 100`;
  * without the extender (kube-scheduler alone counting vgpu.io/cores as an extended resource),
    with both settings;
  * DRA: without the extender, the pods' claims allocated by kube-scheduler's DynamicResources
    plugin, with both settings.
Last, for each variant with the extender or DRA, what it adds to kube-scheduler's
scheduling-algorithm time per pod over kube-scheduler alone with the same
percentageOfNodesToScore, and its pods/s. `--scenario allocation`: trace pods through both vgpu
paths (bench/real_allocation.py). The admission policy is not installed (the fill pods are
created bound, as admin). Needs Go and a quiet machine for figures worth comparing; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import real_metrics
from bench.real_sched import dra, fill, runs
from bench.real_sched.runs import Edit, Obj
from tests.realk8s.binary import build
from tests.realk8s.cluster import RealCluster


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
    "dra-default-pct": (_without_extender, ()),
    "dra-pct-100": (_no_extender_all_nodes, ()),
}
"""Each variant: its edit of the shipped scheduler configuration and the extender's flags
(`dra-*` variants: the pods ask through a claim template, bench/real_sched/runs.py)."""


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


def _allocation(cluster: RealCluster, root: Path, count: int, args: argparse.Namespace) -> None:
    from bench.real_allocation import CPU_MILLI, MEMORY_MIB, compare

    key = cluster.key_file.read_text().encode()
    cluster.procs.stop("kube-scheduler")
    dra.start(cluster)

    def populate(nodes: int) -> None:
        shape = (f"{CPU_MILLI}m", f"{MEMORY_MIB}Mi")
        also = lambda admin, _i, name, uid: dra.publish_slice(admin, name, uid)  # noqa: E731
        fill.populate(cluster.admin, nodes, key, fill.no_fill, shape, also)
        time.sleep(5)  # the extender's watch sees every node

    edit = _with_qps(_kube_default if args.default_pct else _all_nodes, args.qps)
    compare(cluster, root, count, tune=args.tune, seed=args.seed, populate=populate, edit=edit)


def _throughput(cluster: RealCluster, count: int, args: argparse.Namespace) -> None:
    began = time.monotonic()
    sample = args.scenario == "sample"
    filling = fill.fragmented_fill(count) if sample else fill.fill_pod
    wanted = args.variants.split(",")
    key = cluster.key_file.read_text().encode()
    with_dra = any(v.startswith("dra") for v in wanted) and not sample
    if with_dra:
        dra.start(cluster)
        dra.share_template(cluster.admin, runs.SHARE, 50)
    fill.populate(cluster.admin, count, key, filling, also=dra.on_node if with_dra else None)
    shape = "every GPU half used but one node's" if sample else "half full"
    print(
        f"{count} nodes x {fill.GPUS} GPUs, {shape} (set up in {time.monotonic() - began:.0f}s; "
        f"load average {_load()})",
        flush=True,
    )
    time.sleep(5)  # the extender's watch catches up with the fill
    flags: tuple[str, ...] = ()
    if args.profile_extender:
        _restart_extender(cluster, flags, args.profile_extender)
    for label, (edit, extender_flags) in VARIANTS.items():
        if label not in wanted:
            continue
        if extender_flags != flags and label.startswith("extender"):
            flags = extender_flags
            _restart_extender(cluster, flags, args.profile_extender)
        if sample and label.startswith("extender"):
            runs.sample_run(cluster, label, args.timeout, _with_qps(edit, args.qps))
        elif not sample:
            runs.run(cluster, label, args.pods, args.timeout, _with_qps(edit, args.qps))
            print(f"    load average {_load()}", flush=True)
    runs.added()
    runs.ALGORITHM_MS.clear()
    runs.RATES.clear()
    if args.profile_extender:
        cluster.procs.stop("extender-0", grace=30)
        real_metrics.print_profile(args.profile_extender)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _arguments() -> argparse.Namespace:
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
        "allocation: trace pods on empty nodes through the extender and through DRA, against "
        "`vgpu simulate` (bench/real_allocation.py)",
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
    parser.add_argument(
        "--default-pct",
        action="store_true",
        help="allocation: kube-scheduler's adaptive percentageOfNodesToScore (default: 100)",
    )
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    binary, seconds = build()
    print(f"hack/testcluster built in {seconds:.1f}s")
    for count in [int(n) for n in args.nodes.split(",")]:
        root = Path(tempfile.mkdtemp(prefix="vkb-"))
        cluster = RealCluster(root, binary, [], admission_policy=False)
        try:
            cluster.up()
            if args.scenario == "allocation":
                _allocation(cluster, root, count, args)
            else:
                _throughput(cluster, count, args)
        finally:
            cluster.down()
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
