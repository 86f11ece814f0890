"""Benchmark: one replay of the embedded openb trace (tune 1.3, one seed) per policy.

Prints wall seconds per run, pods per second and the memoised fragmentation keys, e.g.

    python bench/simulate_speed.py                # fgd and default, seed 42
    python bench/simulate_speed.py --policy bestfit --seed 43 --repeat 3

Target (issue: simulator): one fgd run ≤ 30 s on a 2-core machine. The FGD authors' Go simulator
took 1,837 s for the same run on such a machine (it also logs fragmentation after every pod).
"""

from __future__ import annotations

import argparse
import statistics
import time

from vgpu.cli.trace_files import read_trace
from vgpu.core.policy.specs import make_policy
from vgpu.core.workload import workload_from
from vgpu.sim.engine import capacity_milli, replay
from vgpu.sim.runner import figure
from vgpu.sim.workload import arrivals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--policy", action="append", help="policy (repeatable; default fgd, default)"
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    trace = read_trace()
    print(
        f"trace read in {time.perf_counter() - started:.2f} s: {len(trace.nodes)} nodes, {len(trace.pods)} pods"
    )
    pods = arrivals(
        trace.pods, capacity_milli=capacity_milli(trace.nodes), tune=1.3, seed=args.seed
    )
    for name in args.policy or ["fgd", "default"]:
        times = []
        for _ in range(args.repeat):
            policy = make_policy(name, workload_from(trace.pods))
            result = replay(trace.nodes, pods, policy, seed=args.seed)
            times.append(result.seconds)
        best = min(times)
        print(
            f"{name:>14}: {statistics.median(times):6.2f} s/run (best {best:.2f} s), "
            f"{len(pods) / best:7.0f} pods/s, {len(pods)} pods, "
            f"alloc@100% {figure(result.alloc_pct_at_100)}"
        )


if __name__ == "__main__":
    main()
