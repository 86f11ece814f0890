"""The queue release pass never holds the cache's lock for long (5,000 held pods on
100 nodes made a 10.5 s pass under the lock, and a filter waited 10.8 s): it works on a snapshot
and takes the lock one job at a time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.extender.builders import make_node, make_pod
from vgpu.api.queues import read_config
from vgpu.extender.cache import ClusterCache
from vgpu.extender.queue_pass import QueueIndex, decide
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


def _record_holds(cache: ClusterCache, holds: list[float]) -> None:
    """Time every hold of the lock taken through `atomic` (what the pass and a filter use)."""
    atomic = cache.atomic

    @contextmanager
    def timed() -> Iterator[None]:
        with atomic():
            start = time.perf_counter()
            try:
                yield
            finally:
                holds.append(time.perf_counter() - start)

    cache.atomic = timed  # type: ignore[method-assign]


def test_a_release_pass_over_many_held_pods_holds_the_lock_a_job_at_a_time() -> None:
    ext, index = _cluster(nodes=40, held=2_000)
    holds: list[float] = []
    _record_holds(ext.cache, holds)
    queues = [{"name": f"q{i}", "namespaces": [f"q{i}"]} for i in range(10)]  # one each
    config = read_config(json.dumps({"queues": queues}))
    start = time.perf_counter()
    decision = decide(index.parts, index, config, now=2e9, held_since={}, may_reclaim=False)
    took = time.perf_counter() - start
    assert len(decision.release) == 40 * 8 * 2  # two 50-core pods per GPU
    assert max(holds) < 0.05, f"the lock was held {max(holds):.3f} s of a {took:.2f} s pass"
    assert len(holds) > len(decision.release)
