"""Extender memory over many pod lives: RSS must not grow with pods scheduled.

    python bench/pod_lives_rss.py [--lives 100000] [--nodes 100] [--batch 1000] [--every 10000]
                                  [--trim] [--trace 20000,60000]

Feeds the extender's cache the watch events of `--lives` vGPU pod lives (`bench/pod_lifecycle.py`:
created, bound, kubelet status, admitted, running, deleting, terminated, deleted), `--batch`
pods at a time, decoded as `KubeApi` decodes watch lines and applied by `ClusterCache.apply_pod`;
each pod is filtered once while pending (`Extender.filter` over every node: the policy's memo,
the per-shape answer sets and a pick). Every pod has a CPU request of its own among 7,919 (a new
filter shape for each, so the evaluation memo keeps being filled), and one pod in ten is a gang
of one (PodGroup labels: the gang index). Prints RSS every `--every` lives and the growth from
the first print to the last (the target: within 10 %). With `--trace A,B` it also compares
tracemalloc snapshots taken after A and after B lives and prints the allocation sites that grew
most in between: a store that grows with pods shows there; growth of RSS with no such site is the
allocator's (fragmentation), not ours.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pod_lifecycle import KEY, STEPS, _life
from tests.extender.builders import make_node
from vgpu.adapters import fastjson
from vgpu.adapters.heap import release_free_heap
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.service import Extender
from vgpu.extender.wire import ExtenderArgs

GANG = (
    '"labels":{"app":"train","pod-group.scheduling.sigs.k8s.io/name":"g%d",'
    '"pod-group.scheduling.sigs.k8s.io/min-available":"1"}'
)


def rss_mib() -> float:
    """Resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def _lines(first: int, count: int, nodes: int, version: int) -> list[list[bytes]]:
    """Per step, the watch lines of pods first..first+count, each with its own CPU request."""
    steps: list[list[bytes]] = [[] for _ in STEPS]
    for index in range(first, first + count):
        cpu = f'"cpu":"{1000 + index % 7919}m"'
        for s, (kind, obj) in enumerate(_life(index, nodes)):
            obj = obj.replace('"cpu":"1"', cpu)
            if index % 10 == 0:
                obj = obj.replace('"labels":{"app":"train"}', GANG % index)
            version += 1
            obj = obj.replace('"resourceVersion":"0"', f'"resourceVersion":"{version}"', 1)
            steps[s].append(f'{{"type":"{kind}","object":{obj}}}'.encode())
    return steps


def run(
    lives: int,
    nodes: int,
    batch: int,
    every: int,
    out: list[float] | None = None,
    trace: tuple[int, int] | None = None,
    trim: bool = False,
) -> None:
    """Apply `lives` pod lives; print (and append to `out`) RSS every `every` lives; with
    `trace`, the allocation sites that grew most between those two counts of lives; with
    `trim`, the C heap's free pages are handed back before each measurement."""
    snapshots: list[tracemalloc.Snapshot] = []
    if trace:
        tracemalloc.start(8)
    config = ExtenderConfig(schedulers=frozenset({"default-scheduler"}))
    cache = ClusterCache(key=KEY, memory_unit_mib=256, schedulers=config.schedulers)
    names = [f"node-{i:05d}" for i in range(nodes)]
    for name in names:
        cache.apply_node("ADDED", make_node(name, gpus=8))
    ext = Extender(cache, config=config)
    version, start = 100, time.monotonic()
    for first in range(0, lives, batch):
        steps = _lines(first, min(batch, lives - first), nodes, version)
        version += len(STEPS) * len(steps[0])
        for step, lines in zip(STEPS, steps, strict=True):
            for line in lines:
                event = fastjson.loads(line)
                cache.apply_pod(event["type"], event["object"])
                if step == "created" and "pod-group" not in line.decode():
                    ext.filter(ExtenderArgs(event["object"], names))
        ext.sweep()  # as the daemon's sweeper does every second
        done = first + len(steps[0])
        if done % every == 0 or done == lives:
            rss = _measure(done, time.monotonic() - start, trim)
            if out is not None:
                out.append(rss)
        if trace and done in trace:
            gc.collect()
            snapshots.append(tracemalloc.take_snapshot())
            if len(snapshots) == 2:
                _grown(snapshots[0], snapshots[1])
    assert not cache.pods and not cache.members, "every pod and gang should be gone"


def _measure(done: int, seconds: float, trim: bool) -> float:
    """Print RSS beside the blocks Python has allocated (objects alive): RSS growing while
    the blocks stay flat is the allocators' free memory, not a store of ours."""
    gc.collect()
    trimmed = " after malloc_trim" if trim and release_free_heap() else ""
    rss, blocks = rss_mib(), sys.getallocatedblocks()
    print(f"{done:8d} lives  RSS {rss:7.1f} MiB{trimmed}  {blocks:9,d} blocks  ({seconds:6.1f} s)")
    return rss


def _grown(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, top: int = 12) -> None:
    """Print the allocation sites (8 frames) that grew most from `before` to `after`."""
    skip = [tracemalloc.Filter(False, tracemalloc.__file__)]
    diffs = after.filter_traces(skip).compare_to(before.filter_traces(skip), "traceback")
    total = sum(d.size_diff for d in diffs)
    print(f"traced growth: {total / 1024:+.1f} KiB in {sum(d.count_diff for d in diffs):+d} blocks")
    for diff in diffs[:top]:
        print(f"{diff.size_diff / 1024:+9.1f} KiB {diff.count_diff:+7d} blocks")
        for line in diff.traceback.format()[-6:]:
            print("    " + line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lives", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--trim", action="store_true", help="malloc_trim before measuring")
    parser.add_argument("--trace", help="A,B: compare tracemalloc snapshots after A and B lives")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # bench pods overbook GPUs on purpose; no log per pod
    samples: list[float] = []
    trace = None
    if args.trace:
        first, second = (int(n) for n in args.trace.split(","))
        trace = (first, second)
    run(args.lives, args.nodes, args.batch, args.every, samples, trace, args.trim)
    growth = (samples[-1] - samples[0]) / samples[0] * 100
    print(f"growth from the first print to the last: {growth:+.1f} %")


if __name__ == "__main__":
    main()
