"""CPU the extender spends per pod watch event, without a cluster.

    python bench/pod_watch_cost.py [--nodes 1000] [--pods 2000] [--runs 5] [--profile]

Feeds the extender's pod watch path (the watch stream's JSON decoding as `KubeApi` does it, the
reflector of `vgpu.adapters.kube.reflector`, `ClusterCache.apply_pod`) the events the API server
sends for each vGPU pod's life (`bench/pod_lifecycle.py`): created; bound by the extender (node
name, assignment annotations, PodScheduled); the kubelet's status while it starts the
containers; the node agent's admitted annotation; Running with conditions and container
statuses; deletion requested; containers terminated; deleted. Objects are shaped as
kube-apiserver serves them (defaults filled in, service-account volume, managedFields).
Each round applies one step of every pod's life, in step order, against `--nodes` nodes with
8 GPUs each. Prints CPU microseconds per event of each step (median over the runs) and per
pod life, split into JSON decoding and the rest; `--profile` prints cProfile's top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pod_lifecycle import KEY, STEPS, lives
from tests.extender.builders import make_node
from vgpu.adapters import fastjson
from vgpu.adapters.kube.reflector import Listing, Reflector, WatchEvent
from vgpu.extender.cache.cluster import ClusterCache

Obj = dict[str, Any]


class Transient(Exception):
    """The reflector's transient error type (never raised here)."""


def _reflector(lines: list[bytes], stop: threading.Event) -> Iterator[WatchEvent]:
    """A reflector following a watch stream of `lines`, decoded as `KubeApi` decodes them."""

    def watch(since: str) -> Generator[bytes, None, None]:
        yield from lines

    def listing() -> Listing:
        return Listing([], "1")

    return Reflector(
        listing, watch, expired=Transient, transient=Transient, start_version="1", stop=stop
    ).events()


def _cache(nodes: int) -> ClusterCache:
    cache = ClusterCache(key=KEY, memory_unit_mib=256)
    for i in range(nodes):
        cache.apply_node("ADDED", make_node(f"node-{i:05d}", gpus=8))
    return cache


def _step(
    cache: ClusterCache, lines: list[bytes], profiler: cProfile.Profile | None
) -> tuple[float, float]:
    """CPU seconds to decode the lines (as the reflector does), and to decode, reflect and
    apply them."""
    start = time.process_time()
    for line in lines:
        fastjson.loads(line)
    decode = time.process_time() - start
    stop = threading.Event()
    events = _reflector(lines, stop)
    if profiler is not None:
        profiler.enable()
    start = time.process_time()
    for count, event in enumerate(events, 1):
        cache.apply_pod(event.type, event.object)
        if count == len(lines):
            break
    whole = time.process_time() - start
    if profiler is not None:
        profiler.disable()
    return decode, whole


def _run(
    nodes: int, steps: list[list[bytes]], profiler: cProfile.Profile | None = None
) -> dict[str, tuple[float, float]]:
    """Per step: (decode, whole) CPU microseconds per event."""
    cache = _cache(nodes)
    out = {}
    for step, lines in zip(STEPS, steps, strict=True):
        decode, whole = _step(cache, lines, profiler)
        out[step] = (decode * 1e6 / len(lines), whole * 1e6 / len(lines))
    assert not cache.pods and not cache.ledger.holdings(), "every pod should be gone"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    steps = lives(args.pods, args.nodes)
    if args.profile:
        profiler = cProfile.Profile()
        _run(args.nodes, steps, profiler)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
        return
    runs = [_run(args.nodes, steps) for _ in range(args.runs)]
    print(f"{args.pods} pod lives on {args.nodes} nodes, median of {args.runs} runs (CPU µs)")
    print(f"{'step':18s} {'per event':>10s} {'json':>8s} {'rest':>8s}")
    total = decoded = 0.0
    for step in STEPS:
        whole = statistics.median(r[step][1] for r in runs)
        decode = statistics.median(r[step][0] for r in runs)
        total, decoded = total + whole, decoded + decode
        print(f"{step:18s} {whole:10.1f} {decode:8.1f} {whole - decode:8.1f}")
    print(
        f"{'per pod life':18s} {total:10.1f} {decoded:8.1f} {total - decoded:8.1f}"
        f"  ({len(STEPS)} events, {total / len(STEPS):.1f} µs per event)"
    )


if __name__ == "__main__":
    main()
