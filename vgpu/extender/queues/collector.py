"""Per-queue metrics of the leader's release loop, read at scrape time from its last pass.

* `vgpu_extender_queue_deserved{queue,resource}`, `vgpu_extender_queue_allocated{...}`,
  `vgpu_extender_queue_pending{...}`: core units and memory units (`resource` = cores | memory):
  what the queue deserves (water-filling), holds (released pods) and asks while held;
* `vgpu_extender_queue_share{queue}`: allocated / deserved on its worst dimension (1 = its share);
* `vgpu_extender_queue_released_total`, `vgpu_extender_queue_evictions_total`: pods released
  and evicted by reclaim since this replica started.

Only the leader passes and exports the gauges; a follower exports the counters only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from vgpu.extender.queues.release_pass import Standing


class QueueFigures(NamedTuple):
    """What the collector reads: each queue's standing and the loop's counts."""

    standing: Mapping[str, Standing]
    released: int
    evicted: int


class QueueCollector(Collector):
    """Queue gauges from `source()` (the release loop's last pass)."""

    def __init__(self, source: Callable[[], QueueFigures]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        figures = self._source()
        for family, field in (
            (
                GaugeMetricFamily(
                    "vgpu_extender_queue_deserved",
                    "Units the queue deserves (water-filling over the queues that ask)",
                    labels=["queue", "resource"],
                ),
                "deserved",
            ),
            (
                GaugeMetricFamily(
                    "vgpu_extender_queue_allocated",
                    "Units the queue's released pods hold",
                    labels=["queue", "resource"],
                ),
                "allocated",
            ),
            (
                GaugeMetricFamily(
                    "vgpu_extender_queue_pending",
                    "Units the queue's held pods ask",
                    labels=["queue", "resource"],
                ),
                "pending",
            ),
        ):
            for queue, standing in sorted(figures.standing.items()):
                value = getattr(standing, field)
                family.add_metric([queue, "cores"], value[0])
                family.add_metric([queue, "memory"], value[1])
            yield family
        shares = GaugeMetricFamily(
            "vgpu_extender_queue_share",
            "Allocated over deserved on the queue's worst dimension (1: its share)",
            labels=["queue"],
        )
        for queue, standing in sorted(figures.standing.items()):
            shares.add_metric([queue], float(standing.share))
        yield shares
        yield CounterMetricFamily(
            "vgpu_extender_queue_released", "Pods released from queues", value=figures.released
        )
        yield CounterMetricFamily(
            "vgpu_extender_queue_evictions",
            "Pods evicted by queue reclaim (through the Eviction API)",
            value=figures.evicted,
        )
