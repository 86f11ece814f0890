"""How much of the first 100 % of arrivals an offline packer could place (a bound on online).

    python hack/offline_oracle.py [--pods CSV] [--seeds 42-51] [--policy NAME ...]

For each seed, take the replay's arrival sequence (as `vgpu simulate` builds it, tune 1.3) up to
the pod whose GPU request takes the arrived total past 100 % of cluster capacity. An online
policy must place those pods in arrival order; an offline packer may reorder them. Here they are
placed largest first (GPUs per pod, then share per GPU, then CPU: first-fit-decreasing order)
with each named policy, workload-aware ones given the prefix's own workload (`online=0`), and
the allocation after the last of them is printed: what the same pods reach when order is free.
Medians over seeds are printed last. Not a proof of optimality (packing is NP-hard); an LP
over shapes and node classes gives an upper bound.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import median

from vgpu.core.model import PodRequest
from vgpu.core.registry import make_policy
from vgpu.core.workload import workload_from
from vgpu.sim.engine import capacity_milli, replay
from vgpu.sim.trace import read_trace
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
        ordered = sorted(pods, key=largest_first)
        for name in args.policy or ["bestfit", "fgd", "default:online=0"]:
            policy = make_policy(name, workload_from(pods))
            run = replay(nodes, ordered, policy, seed=seed)
            results.setdefault(name, []).append(run.alloc_pct_final)
            print(f"seed {seed} {name}: {run.alloc_pct_final:.2f} % of {demand:.2f} % arrived")
    for name, values in results.items():
        print(f"median {name}: {median(values):.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
