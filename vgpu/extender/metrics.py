"""Prometheus metrics of the extender, on a registry of its own (several instances may share a
process in tests).

* `vgpu_extender_request_seconds{verb}`: latency histogram per verb;
* `vgpu_extender_filter_rejections_total{reason}`: nodes rejected by filter, by verdict code;
* `vgpu_extender_binds_total{outcome}`: bind results: ok, error, or deferred (a gang member
  waiting by design for its peers or for an equal member's admission; it keeps its place);
* `vgpu_extender_invalid_pods_total`: watched pod versions skipped because they cannot be read;
* `vgpu_extender_unwatched_filters_total`: filters refused because the watch did not show
  their pod (under the UID the request names) within the wait: an error kube-scheduler retries;
* `vgpu_extender_preemption_waits_total`: filters answered with an error (retried) because a
  node takes the pod in a moment and refusing every node could make kube-scheduler preempt;
* `vgpu_extender_refused_requests_total{reason}`: requests refused before any verb ran
  (no-client-certificate, malformed, timeout, too-many-connections): a client that is not
  kube-scheduler, or one misbehaving;
* `vgpu_extender_connections_total`: connections accepted (each a TLS handshake);
* `vgpu_extender_unreadable_objects{kind}`: nodes and pods carrying a value that cannot be read
  (read at scrape time);
* `vgpu_extender_gangs{state}`, `vgpu_extender_reservations`, `vgpu_extender_assumed`,
  `vgpu_extender_pending_containers{node}` (bound, not yet admitted): read at scrape time;
* `vgpu_extender_leader` (this replica holds the Lease) and `vgpu_extender_binding_ready` (it may
  bind: cache resynced for its term), so alerts can tell "no leader" from "a leader that is stuck".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from vgpu.core.model import Phase
from vgpu.extender.service import Extender

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _StateCollector(Collector):
    def __init__(self, extender: Extender) -> None:
        self._ext = extender

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ext = self._ext
        with ext.cache.atomic():
            counts = ext.cache.gangs.counts()
            phases = Counter(h.phase for h in ext.cache.ledger.holdings())
            pending = {n: sum(map(len, pods.values())) for n, pods in ext.cache.pending.items()}
        unreadable = GaugeMetricFamily(
            "vgpu_extender_unreadable_objects",
            "Watched objects carrying a value the extender cannot read, by kind: a node with an "
            "unreadable inventory (unschedulable for vGPU pods), a pod that cannot be read or "
            "whose vgpu.io/admitted cannot be (counted with its assignment)",
            labels=["kind"],
        )
        for kind, n in sorted(ext.cache.unreadable().items()):
            unreadable.add_metric([kind], n)
        yield unreadable
        gangs = GaugeMetricFamily("vgpu_extender_gangs", "Gangs by state", labels=["state"])
        for state, n in sorted(counts.items()):
            gangs.add_metric([state], n)
        yield gangs
        yield GaugeMetricFamily(
            "vgpu_extender_reservations",
            "Gang member reservations held",
            value=phases.get(Phase.RESERVED, 0),
        )
        yield GaugeMetricFamily(
            "vgpu_extender_assumed",
            "Pods assumed while binding",
            value=phases.get(Phase.ASSUMED, 0),
        )
        yield GaugeMetricFamily(
            "vgpu_extender_bound", "Bound pods counted", value=phases.get(Phase.BOUND, 0)
        )
        waiting = GaugeMetricFamily(
            "vgpu_extender_pending_containers",
            "Containers bound to a node and not yet admitted by its agent",
            labels=["node"],
        )
        for node, n in sorted(pending.items()):
            waiting.add_metric([node], n)
        yield waiting


class _LeadershipCollector(Collector):
    def __init__(self, leads: Callable[[], bool], may_bind: Callable[[], bool]) -> None:
        self._leads, self._may_bind = leads, may_bind

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "vgpu_extender_leader",
            "1 while this replica holds the extender Lease",
            value=int(self._leads()),
        )
        yield GaugeMetricFamily(
            "vgpu_extender_binding_ready",
            "1 while this replica may bind (leader with a cache resynced for its term)",
            value=int(self._may_bind()),
        )


class ExtenderMetrics:
    """The extender's metrics and their registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "vgpu_extender_request_seconds",
            "Extender request latency by verb",
            ["verb"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.rejections = PromCounter(
            "vgpu_extender_filter_rejections_total",
            "Nodes rejected by filter, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.binds = PromCounter(
            "vgpu_extender_binds_total",
            "Bind results: ok, error, deferred (a gang member waiting by design)",
            ["outcome"],
            registry=self.registry,
        )
        self.refused = PromCounter(
            "vgpu_extender_refused_requests",
            "Requests refused before any verb ran, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.connections = PromCounter(
            "vgpu_extender_connections",
            "Connections accepted; over TLS each cost a full handshake, so a count that keeps "
            "pace with the requests means the client does not keep its connections alive",
            registry=self.registry,
        )
        self.invalid_pods = PromCounter(
            "vgpu_extender_invalid_pods",
            "Watched pod versions skipped because they cannot be read",
            registry=self.registry,
        )
        self.unwatched_filters = PromCounter(
            "vgpu_extender_unwatched_filters",
            "Filters refused because the watch did not show their pod (under the UID the "
            "request names) within the wait; kube-scheduler retries them after its backoff",
            registry=self.registry,
        )
        self.preemption_waits = PromCounter(
            "vgpu_extender_preemption_waits",
            "Filters answered with an error (retried after backoff) because a node takes the pod "
            "in a moment and refusing every node could make kube-scheduler preempt for it",
            registry=self.registry,
        )

    def watch(self, extender: Extender) -> None:
        """Report the extender's ledger and gangs at scrape time."""
        self.registry.register(_StateCollector(extender))

    def watch_leadership(self, leads: Callable[[], bool], may_bind: Callable[[], bool]) -> None:
        """Report leadership at scrape time (`leads` is always true without leader election)."""
        self.registry.register(_LeadershipCollector(leads, may_bind))

    def count_rejections(self, reasons: Counter[str]) -> None:
        """Add one filter call's rejections."""
        for reason, n in reasons.items():
            self.rejections.labels(reason).inc(n)

    def observer(self, verb: str) -> Callable[[float], None]:
        """A function recording one latency sample for `verb`."""
        return self.latency.labels(verb).observe

    def exposition(self) -> bytes:
        """The text format for /metrics."""
        return bytes(generate_latest(self.registry))
