"""Hand-off soak: random pods through the extender, the node agents and the kubelet model.

    python bench/handoff_soak.py [--pods 10000] [--seed 0] [--topology none] [--report-numa]
                                 [--watch-lag 0.0]

3 nodes x 8 fake T4 GPUs (NUMA nodes 0 and 1). Pods: shares with different memory asks and
cores limits, whole GPUs, two-container pods, init containers (with and without a sidecar) and
gangs of 2-4. The kubelet model (tests/kubelet_model, written from the kubelet's device manager
and topology manager) allocates resources in random order, reuses init containers' devices,
ignores 2 % of GetPreferredAllocation answers and restarts between containers 2 % of the time;
agents restart 0.5 % of steps; with --watch-lag P, each bind reaches the kubelet before the
agent's pod watch with probability P (the agent re-lists its pods on a miss and before a call
surely starts a pod's admission; the lists are counted). Prints admitted / refused-avoidably /
refused-unavoidably / swapped (targets: 0 swapped, 0 refused-avoidably), the pods given up as
unschedulable and the agents' pod lists.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.kubelet_model.soak import SoakConfig, soak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--topology", default="none")
    parser.add_argument("--report-numa", action="store_true")
    parser.add_argument("--watch-lag", type=float, default=0.0, metavar="P")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    cfg = SoakConfig(
        pods=args.pods,
        seed=args.seed,
        topology=args.topology,
        report_numa=args.report_numa,
        watch_lag=args.watch_lag,
    )
    start = time.perf_counter()
    world, unschedulable = soak(cfg)
    took = time.perf_counter() - start
    t = world.tally
    print(
        f"pods: {cfg.pods} on {cfg.nodes} nodes x {cfg.gpus} GPUs, seed {cfg.seed}, "
        f"topology {cfg.topology}, report-numa {cfg.report_numa}, watch lag {cfg.watch_lag}: "
        f"{took:.1f} s"
    )
    print(f"admitted: {t['admitted']}")
    print(f"refused-avoidably: {t['refused-avoidably']}")
    print(f"refused-unavoidably: {t['refused-unavoidably']}")
    print(f"swapped: {t['swapped']}")
    print(f"unschedulable (given up): {unschedulable}")
    per = world.relists / max(1, t["admitted"] + t["refused-avoidably"] + t["refused-unavoidably"])
    print(f"agent pod lists at device-plugin calls: {world.relists} ({per:.2f} per admission)")
    for line in world.refusals[:5] + world.swaps[:5]:
        print("  ", line)
    return 0 if not t["swapped"] and not t["refused-avoidably"] else 1


if __name__ == "__main__":
    sys.exit(main())
