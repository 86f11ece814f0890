"""Filter latency for everyone else while one tenant loads the extender.

    python bench/tenant_load.py [--nodes 1000] [--held 5000] [--seconds 8]

One extender (its cache, verbs and queue pass, in this process: the serving loop is one thread,
as in the daemon, and the queue pass another, sharing the GIL and the cache's lock) over
`--nodes` nodes of 8 GPUs. Other teams' pods (30/50/100/200 cores) are filtered over every node
name, one after another as kube-scheduler's scheduling cycles send them, in four runs:

* quiet: nothing else;
* tenant: between two of theirs, the serving loop serves one filter of the tenant's: a pod of
  600 look-alike init containers (past the cap: refused) or one of 64, the cap (placed), with
  20 pods of 64 such containers pending on nodes that every filter must keep invariant I with;
* held: `--held` gated pods in 10 queues that fit nowhere, and the leader's queue pass running
  back to back over them (`vgpu.extender.queues.release_pass.decide`);
* both at once.

Prints, per run, p50/p99 of an other-team filter (its own time on the serving loop, including
waits for the cache's lock) and p99 of the tenant's filters (the time the next pod's cycle waits
behind one), plus the queue pass's duration. Target: p99 under 50 ms for everyone else.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.extender.builders import make_node, make_pod
from tests.pods import container
from vgpu.api.queues.config import read_config
from vgpu.core.ids import PodKey
from vgpu.core.model import Assignment
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.queues.release_pass import QueueIndex, decide
from vgpu.extender.service import Extender
from vgpu.extender.wire import ExtenderArgs

Obj = dict[str, Any]
PENDING = 20
"""Pods of 64 look-alike containers bound and not yet admitted (their nodes' filters check them)."""
QUEUES = read_config(
    json.dumps({"queues": [{"name": f"q{i}", "namespaces": [f"team-{i}"]} for i in range(10)]})
)
"""Ten queues, each bound to its team's namespace (a pod counts only in its namespace's queue)."""


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def _pod(ext: Extender, name: str, init: int = 0, **kw: Any) -> Obj:
    """A pod the watch shows (the verbs read pods from it), with `init` 1-core init containers."""
    pod = make_pod(name, **kw)
    pod["metadata"]["uid"] = f"uid-{name}"
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    if init:
        pod["spec"]["initContainers"] = [container(f"i{k}", cores=1) for k in range(init)]
    ext.cache.apply_pod("ADDED", pod)
    return pod


def _cluster(nodes: int) -> tuple[Extender, list[str]]:
    cache = ClusterCache(key=b"bench", memory_unit_mib=256)
    ext = Extender(cache)
    names = [f"node-{i:04d}" for i in range(nodes)]
    for name in names:
        cache.apply_node("ADDED", make_node(name, gpus=8))
    return ext, names


def _pending(ext: Extender, names: list[str]) -> None:
    """The tenant's pods of 64 look-alike containers, assumed on nodes (a bind in flight)."""
    for i in range(PENDING):
        pod = _pod(ext, f"tenant-pending-{i}", init=63, cores=1)
        spec = ext.cache.pod(PodKey(f"default/{pod['metadata']['name']}"))
        assert spec is not None
        placed = ext.cache.place(
            spec, names[i * len(names) // PENDING], ext.policies.default, ext.scheduler
        )
        assert isinstance(placed, Assignment), placed
        ext.cache.assume(placed, ext.clock())


def _held(ext: Extender, held: int) -> QueueIndex:
    """Gated pods in ten queues, each asking a GPU model no node has: they fit nowhere, and no
    two ask the same (cores 1-100 x memory blocks 1-50), so no pass learns from another pod."""
    index = QueueIndex(ext.queue_parts())
    for i in range(held):
        pod = _pod(
            ext,
            f"held-{i}",
            cores=1 + i % 100,
            memory=1 + i // 100 % 50,
            namespace=f"team-{i % 10}",
            labels={"vgpu.io/queue": f"q{i % 10}"},
            annotations={"vgpu.io/gpu-type": "H200"},
        )
        pod["spec"]["schedulingGates"] = [{"name": "vgpu.io/queue"}]
        ext.cache.apply_pod("MODIFIED", pod)
        index.apply("ADDED", pod)
    return index


def _passes(ext: Extender, index: QueueIndex, stop: threading.Event, took: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        decide(index.parts, index, QUEUES, now=2e9, held_since={}, may_reclaim=False)
        took.append(time.perf_counter() - start)


def _serve(
    ext: Extender, names: list[str], others: list[Obj], tenant: list[Obj], seconds: float
) -> tuple[list[float], list[float]]:
    """The serving loop: other teams' filters, each after one of the tenant's (if any)."""
    mine: list[float] = []
    theirs: list[float] = []
    end = time.perf_counter() + seconds
    i = 0

    def timed(pod: Obj, into: list[float]) -> None:
        start = time.perf_counter()
        ext.filter(ExtenderArgs(pod, names))
        into.append(time.perf_counter() - start)

    while time.perf_counter() < end:
        if tenant:
            timed(tenant[i % len(tenant)], theirs)
        timed(others[i % len(others)], mine)
        i += 1
    return mine, theirs


def _run(
    label: str, serve: Callable[[], tuple[list[float], list[float]]], passes: list[float]
) -> None:
    mine, theirs = serve()
    line = f"{label:7s} other teams' filter p50 {_pct(mine, 0.5):6.2f} ms  p99 {_pct(mine, 0.99):6.2f} ms"
    line += f"  ({len(mine)} filters)"
    if theirs:
        line += f"; tenant's filter p99 {_pct(theirs, 0.99):6.2f} ms"
    if passes:
        line += f"; queue pass {min(passes):.2f}-{max(passes):.2f} s ({len(passes)} passes)"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--held", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    start = time.perf_counter()
    ext, names = _cluster(args.nodes)
    others = [_pod(ext, f"other-{c}", cores=c) for c in (30, 50, 100, 200)]
    tenant = [_pod(ext, "tenant-600", init=599, cores=1), _pod(ext, "tenant-64", init=63, cores=1)]
    _pending(ext, names)
    print(f"{args.nodes} nodes x 8 GPUs, set up in {time.perf_counter() - start:.1f} s", flush=True)
    for pod in others + tenant:  # the first call per pod shape builds its answer sets
        ext.filter(ExtenderArgs(pod, names))
    _run("quiet", partial(_serve, ext, names, others, [], args.seconds), [])
    _run("tenant", partial(_serve, ext, names, others, tenant, args.seconds), [])
    index = _held(ext, args.held)
    start = time.perf_counter()
    decide(index.parts, index, QUEUES, now=2e9, held_since={}, may_reclaim=False)
    alone = time.perf_counter() - start
    print(f"queue pass alone over {args.held} held pods: {alone:.2f} s", flush=True)
    for label, load in (("held", []), ("both", tenant)):
        stop, took = threading.Event(), list[float]()
        passes = threading.Thread(target=_passes, args=(ext, index, stop, took), daemon=True)
        passes.start()
        try:
            _run(label, partial(_serve, ext, names, others, load, args.seconds), took)
        finally:
            stop.set()
            passes.join()


if __name__ == "__main__":
    main()
