"""How much of the first 100 % of arrivals an offline packer could place (a bound on online).

    python hack/offline_oracle.py [--pods CSV] [--seeds 42-51] [--policy NAME ...]

For each seed, take the replay's arrival sequence (as `vgpu simulate` builds it, tune 1.3) up to
the pod whose GPU request takes the arrived total past 100 % of cluster capacity. An online
policy must place those pods in arrival order; an offline packer may reorder them. Here they are
placed largest first (GPUs per pod, then share per GPU, then CPU: first-fit-decreasing order)
with each named policy, workload-aware ones given the prefix's own workload (`online=0`), and
the allocation after the last of them is printed: what the same pods reach when order is free.

It also prints two figures on GPUs alone (no CPU, host memory or node boundaries, which can
only lower them), for a scheduler that places every share pod of the prefix: the GPUs the
shares need by first-fit decreasing (an offline packing) and at least (the Martello-Toth L2
bound), and the allocation if whole-GPU pods then fill every other GPU. Medians over seeds are
printed last. Not a proof of optimality of anything online: packing is NP-hard.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import median

from vgpu.cli.trace_files import read_trace
from vgpu.core.model import PodRequest
from vgpu.core.policy.specs import make_policy
from vgpu.core.workload import workload_from
from vgpu.sim.engine import capacity_milli, replay
from vgpu.sim.workload import arrivals, per_gpu_milli


def prefix_to_full(pods: Sequence[PodRequest], capacity: int) -> list[PodRequest]:
    """The arrivals up to (not past) 100 % of the cluster's GPU capacity."""
    out, total = [], 0
    for pod in pods:
        if total + pod.gpu_milli > capacity:
            break
        total += pod.gpu_milli
        out.append(pod)
    return out


def largest_first(pod: PodRequest) -> tuple[int, int, int]:
    """Sort key: more GPUs, then a larger share per GPU, then more CPU, come first."""
    gpus = pod.gpu_milli // 1000 if per_gpu_milli(pod) == 1000 else 0
    return (-gpus, -per_gpu_milli(pod), -pod.cpu_milli)


def shares_first(pod: PodRequest) -> tuple[int, int, int]:
    """Sort key: multi-GPU pods, then shares (largest first), then one-GPU, then CPU-only pods:
    whole GPUs fill whatever GPUs the shares left whole, and CPU-only pods the CPU left over."""
    share = per_gpu_milli(pod)
    rank = 0 if pod.gpu_milli > 1000 else 1 if 0 < share < 1000 else 2 if share else 3
    return (rank, -share, -pod.cpu_milli)


ORDERS = {"largest": largest_first, "shares": shares_first}


def ffd_bins(shares: Sequence[int], size: int = 1000) -> int:
    """GPUs that first-fit decreasing packs the shares (milli) into."""
    free: list[int] = []
    for share in sorted(shares, reverse=True):
        for i, room in enumerate(free):
            if room >= share:
                free[i] -= share
                break
        else:
            free.append(size - share)
    return len(free)


def l2_bins(shares: Sequence[int], size: int = 1000) -> int:
    """Martello-Toth L2 lower bound on the GPUs the shares need."""
    best = 0
    for a in {0, *(x for x in shares if x <= size // 2)}:
        big = sum(1 for x in shares if x > size - a)
        mid = [x for x in shares if size // 2 < x <= size - a]
        small = sum(x for x in shares if a <= x <= size // 2)
        spill = max(0, -(-(small - (len(mid) * size - sum(mid))) // size))
        best = max(best, big + len(mid) + spill)
    return best


def gpu_bound(pods: Sequence[PodRequest], gpus: int, bins: int) -> float:
    """Allocation % if every share is placed in `bins` GPUs and whole GPUs fill the rest."""
    shares = sum(p.gpu_milli for p in pods if 0 < per_gpu_milli(p) < 1000)
    whole = sum(p.gpu_milli for p in pods if per_gpu_milli(p) == 1000)
    return 100 * (shares + min(whole, (gpus - bins) * 1000)) / (gpus * 1000)


def seeds_of(text: str) -> list[int]:
    """ "42" or "42-51"."""
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=Path, default=None, help="pod CSV (default: openb)")
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--policy", action="append", help="placement policy (repeatable)")
    parser.add_argument("--tune", type=float, default=1.3)
    parser.add_argument("--order", choices=sorted(ORDERS), default="shares")
    parser.add_argument("--bounds-only", action="store_true", help="print the GPU-only figures")
    args = parser.parse_args(argv)
    trace = read_trace(None, args.pods)
    nodes = tuple(n for n in trace.nodes if n.gpus)
    capacity = capacity_milli(nodes)
    results: dict[str, list[float]] = {}
    for seed in seeds_of(args.seeds):
        pods = prefix_to_full(
            arrivals(trace.pods, capacity_milli=capacity, tune=args.tune, seed=seed), capacity
        )
        demand = 100 * sum(p.gpu_milli for p in pods) / capacity
        shares = [per_gpu_milli(p) for p in pods if 0 < per_gpu_milli(p) < 1000]
        ffd, l2 = ffd_bins(shares), l2_bins(shares)
        for name, bins in (("gpus-only ffd", ffd), ("gpus-only bound", l2)):
            results.setdefault(name, []).append(gpu_bound(pods, capacity // 1000, bins))
        print(f"seed {seed}: shares need {ffd} GPUs by first-fit decreasing, >= {l2} (L2)")
        ordered = sorted(pods, key=ORDERS[args.order])
        for name in [] if args.bounds_only else args.policy or ["bestfit", "default:online=0"]:
            policy = make_policy(name, workload_from(pods))
            run = replay(nodes, ordered, policy, seed=seed)
            results.setdefault(name, []).append(run.alloc_pct_final)
            print(f"seed {seed} {name}: {run.alloc_pct_final:.2f} % of {demand:.2f} % arrived")
    for name, values in results.items():
        print(f"median {name}: {median(values):.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
