"""The queue release pass never holds the cache's lock for long (5,000 held pods on
100 nodes made a 10.5 s pass under the lock, and a filter waited 10.8 s): it works on a snapshot
and takes the lock one job at a time."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.extender.builders import make_node, make_pod
from vgpu.api.queues.config import read_config
from vgpu.core.scheduler import Scheduler
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.queues.release_pass import QueueIndex, decide
from vgpu.extender.service import Extender

GATE = [{"name": "vgpu.io/queue"}]


def _cluster(nodes: int, held: int) -> tuple[Extender, QueueIndex]:
    """`nodes` nodes of 8 GPUs and `held` gated pods of 50 cores in ten queues, each
    queue serving a namespace of its name: a fifth fit."""
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    ext = Extender(cache)
    index = QueueIndex(ext.queue_parts())
    for i in range(nodes):
        cache.apply_node("ADDED", make_node(f"n{i}", gpus=8))
    for i in range(held):
        queue = f"q{i % 10}"
        pod = make_pod(f"h{i}", cores=50, namespace=queue, labels={"vgpu.io/queue": queue})
        pod["metadata"] |= {"uid": f"u{i}", "creationTimestamp": "2026-01-01T00:00:00Z"}
        pod["spec"]["schedulingGates"] = list(GATE)
        cache.apply_pod("ADDED", pod)
        index.apply("ADDED", pod)
    return ext, index


@contextmanager
def _recording_holds(cache: ClusterCache) -> Iterator[list[float]]:
    """Time every hold of the lock taken through `atomic` (what the pass and a filter use), in
    the holding thread's CPU time less the garbage collector's: on a loaded machine the scheduler
    may stop a thread inside any hold, and a full collection of the whole test session's heap
    (0.14 s in CI's run) may land in any hold; neither says anything about the work done under
    the lock."""
    atomic = cache.atomic
    holds: list[float] = []
    collecting: list[float] = [0.0, 0.0]  # [started at, total so far]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[0] = time.thread_time()
        else:
            collecting[1] += time.thread_time() - collecting[0]

    gc.callbacks.append(on_gc)

    @contextmanager
    def timed() -> Iterator[None]:
        with atomic():
            start, collected = time.thread_time(), collecting[1]
            try:
                yield
            finally:
                holds.append(time.thread_time() - start - (collecting[1] - collected))

    cache.atomic = timed  # type: ignore[method-assign]
    try:
        yield holds
    finally:
        gc.callbacks.remove(on_gc)


def test_a_release_pass_over_many_held_pods_holds_the_lock_a_job_at_a_time() -> None:
    ext, index = _cluster(nodes=40, held=2_000)
    queues = [{"name": f"q{i}", "namespaces": [f"q{i}"]} for i in range(10)]  # one each
    config = read_config(json.dumps({"queues": queues}))
    start = time.perf_counter()
    with _recording_holds(ext.cache) as holds:
        decision = decide(index.parts, index, config, now=2e9, held_since={}, may_reclaim=False)
    took = time.perf_counter() - start
    assert len(decision.release) == 40 * 8 * 2  # two 50-core pods per GPU
    assert max(holds) < 0.05, f"the lock was held {max(holds):.3f} s (CPU) of a {took:.2f} s pass"
    assert len(holds) > len(decision.release)


def test_held_pods_that_ask_more_than_any_node_offers_are_ruled_out_without_a_select(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Held pods of different shapes that fit nowhere cost one `Scheduler.select` each, every
    node evaluated (5,000 such pods at 1,000 nodes: a 24-35 s pass). Those asking a GPU model no
    node has, or more than any node has free, are ruled out from the cluster's headroom instead
    (`vgpu.core.headroom`); pods that fit are still placed."""
    ext, index = _cluster(nodes=4, held=20)  # 50-core pods: all fit
    for i in range(200):  # 200 shapes, a model no node has
        queue = f"q{i % 10}"
        pod = make_pod(
            f"h200-{i}",
            cores=1 + i % 99,
            namespace=queue,
            labels={"vgpu.io/queue": queue},
            annotations={"vgpu.io/gpu-type": "H200"},
        )
        pod["metadata"] |= {"uid": f"x{i}", "creationTimestamp": "2026-01-01T00:00:00Z"}
        pod["spec"]["schedulingGates"] = list(GATE)
        ext.cache.apply_pod("ADDED", pod)
        index.apply("ADDED", pod)
    calls: list[str] = []
    select = Scheduler.select

    def counted(self: Scheduler, *args: Any, **kw: Any) -> Any:
        calls.append(str(args[0].key))
        return select(self, *args, **kw)

    monkeypatch.setattr(Scheduler, "select", counted)
    queues = [{"name": f"q{i}", "namespaces": [f"q{i}"]} for i in range(10)]
    config = read_config(json.dumps({"queues": queues}))
    decision = decide(index.parts, index, config, now=2e9, held_since={}, may_reclaim=False)
    assert len(decision.release) == 20
    nowhere = [key for key in calls if "/h200-" in key]
    assert nowhere == [], f"{len(nowhere)} selects for 200 pods no node can take"
    assert calls, "the pods that fit are still placed by the scheduler"
