"""Hand-off soak: random pods through the extender, the node agents and the kubelet model.

    python bench/handoff_soak.py [--pods 10000] [--seed 0] [--topology none] [--report-numa]
                                 [--watch-lag 0.0] [--backoff 0] [--every 10000]
                                 [--sample 1000] [--tracemalloc FRAMES]

3 nodes x 8 fake T4 GPUs (NUMA nodes 0 and 1). Pods: shares with different memory asks and
cores limits, whole GPUs, two-container pods, init containers (with and without a sidecar) and
gangs of 2-4. The kubelet model (tests/kubelet_model, written from the kubelet's device manager
and topology manager) allocates resources in random order, reuses init containers' devices,
ignores 2 % of GetPreferredAllocation answers and restarts between containers 2 % of the time;
agents restart 0.5 % of steps; with --watch-lag P, each bind reaches the kubelet before the
agent's pod watch with probability P (the agent re-lists its pods on a miss and before a call
surely starts a pod's admission; the lists are counted); with --backoff N, a pod that did not
fit is tried again after 1, 2, 4 ... at most N steps (kube-scheduler's backoff, a step as a
second) instead of every step. Prints admitted / refused-avoidably /
refused-unavoidably / swapped (targets: 0 swapped, 0 refused-avoidably), the pods given up as
unschedulable and the agents' pod lists.

Every --every pods (the long soak: `--pods 100000`) it prints a row: the tallies so far,
the live pods, the process's resident set and the retained size of the extender's state and of
each agent's state (`tests/kubelet_model/soak_memory.py` says what is counted). Memory is read
every --sample pods; a row shows the peak of the readings since the previous row, as bounded
memos emptied when full make single readings a sawtooth; the harness's retained size and
Python's allocated blocks (thousands) tell a leak from the allocator's high-water mark when
the resident set grows. At the end it says whether each target held: 0 swapped, 0 avoidable
refusals, and each memory figure flat (the last row at most 10 % above the first, the one at
--every pods). With --tracemalloc FRAMES it also prints the allocations
made from vgpu's files that grew most since the first row, by traceback (slow: a diagnostic).
It asserts nothing; the exit status is 1 when a target failed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.kubelet_model.soak import Progress, SoakConfig, soak
from tests.kubelet_model.soak_memory import MemoryReading, flat, peak, read_memory
from tests.kubelet_model.world import World

MIB, KIB = 1 << 20, 1 << 10
HEADER = (
    f"{'pods':>7} {'admitted':>8} {'avoid':>5} {'unavoid':>7} {'swapped':>7} {'unsched':>7} "
    f"{'live':>4} {'RSS MiB':>7} {'ext KiB':>7}  agents KiB{'':>8} {'harness':>7} "
    f"{'kblocks':>7} {'s':>6}"
)


class Rows:
    """Readings every `sample` pods, a row of their peaks every `every` pods (and at the end)."""

    def __init__(self, every: int, frames: int) -> None:
        self.start = time.perf_counter()
        self.every = every
        self.readings: list[MemoryReading] = []
        self.window: MemoryReading | None = None
        self.frames = frames
        self.baseline: tracemalloc.Snapshot | None = None

    def __call__(self, world: World, at: Progress) -> None:
        self.window = peak(self.window, read_memory(world))
        if not at.drained and at.submitted < (len(self.readings) + 1) * self.every:
            return
        m, self.window = self.window, None
        t = world.tally
        pods = "end" if at.drained else str(at.submitted)
        agents = "/".join(f"{a // KIB}" for a in m.agents)
        print(
            f"{pods:>7} {t['admitted']:>8} {t['refused-avoidably']:>5} "
            f"{t['refused-unavoidably']:>7} {t['swapped']:>7} {at.unschedulable:>7} "
            f"{m.live_pods:>4} {m.rss / MIB:>7.1f} {m.extender // KIB:>7}  {agents:<18} "
            f"{m.harness // KIB:>7} {m.blocks // 1000:>7} {time.perf_counter() - self.start:>6.0f}",
            flush=True,
        )
        if not at.drained:
            self.readings.append(m)
        if self.frames:
            self._growth()

    def _growth(self) -> None:
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, "*/vgpu/*", all_frames=True)]
        )
        if self.baseline is None:
            self.baseline = snap
            return
        for stat in snap.compare_to(self.baseline, "traceback")[:5]:
            print(f"    +{stat.size_diff / KIB:.0f} KiB in {stat.count_diff:+d} blocks:")
            for line in stat.traceback.format(limit=self.frames, most_recent_first=True):
                print(f"      {line}")


def verdict(rows: Rows, swapped: int, avoidable: int) -> bool:
    """Print whether each target held; True when all did."""
    checks = [("0 swapped", swapped == 0), ("0 refused avoidably", avoidable == 0)]
    if len(rows.readings) >= 2:
        first, last = rows.readings[0], rows.readings[-1]
        checks.append(("RSS flat", flat(first.rss, last.rss)))
        checks.append(("extender flat", flat(first.extender, last.extender)))
        for i, (a, b) in enumerate(zip(first.agents, last.agents, strict=True)):
            checks.append((f"agent {i} flat", flat(a, b)))
    else:
        print("memory: fewer than two rows before the end (raise --pods or lower --every)")
    for name, held in checks:
        print(f"target {name}: {'held' if held else 'FAILED'}")
    return all(held for _, held in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--topology", default="none")
    parser.add_argument("--report-numa", action="store_true")
    parser.add_argument("--watch-lag", type=float, default=0.0, metavar="P")
    parser.add_argument("--backoff", type=int, default=0, metavar="STEPS")
    parser.add_argument("--every", type=int, default=10_000, metavar="PODS")
    parser.add_argument("--sample", type=int, default=1_000, metavar="PODS")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if args.tracemalloc:
        tracemalloc.start(args.tracemalloc)
    cfg = SoakConfig(
        pods=args.pods,
        seed=args.seed,
        topology=args.topology,
        report_numa=args.report_numa,
        watch_lag=args.watch_lag,
        backoff=args.backoff,
    )
    print(
        f"pods: {cfg.pods} on {cfg.nodes} nodes x {cfg.gpus} GPUs, seed {cfg.seed}, "
        f"topology {cfg.topology}, report-numa {cfg.report_numa}, watch lag {cfg.watch_lag}, "
        f"backoff {cfg.backoff}"
    )
    print(HEADER, flush=True)
    rows = Rows(args.every, args.tracemalloc)
    world, unschedulable = soak(cfg, every=min(args.sample, args.every), report=rows)
    t = world.tally
    print(f"took {time.perf_counter() - rows.start:.1f} s")
    print(f"admitted: {t['admitted']}")
    print(f"refused-avoidably: {t['refused-avoidably']}")
    print(f"refused-unavoidably: {t['refused-unavoidably']}")
    print(f"swapped: {t['swapped']}")
    print(f"unschedulable (given up): {unschedulable}")
    per = world.relists / max(1, t["admitted"] + t["refused-avoidably"] + t["refused-unavoidably"])
    print(f"agent pod lists at device-plugin calls: {world.relists} ({per:.2f} per admission)")
    for line in world.refusals[:5] + world.swaps[:5]:
        print("  ", line)
    return 0 if verdict(rows, t["swapped"], t["refused-avoidably"]) else 1


if __name__ == "__main__":
    sys.exit(main())
