"""Prometheus metrics of the node agent, and a policy wrapper that counts Allocate outcomes.

Own registry (never the global one), so several agents can live in one test process; the HTTP
endpoint is optional (`--metrics-port 0` disables it). Counters live here; the gauges of GPUs
and containers are read at scrape time by `vgpu.agent.usage.GpuCollector`.

Every pod can reach the endpoint unless the chart's `networkPolicy.nodeAgent` is on, so what a
client costs is bounded: at most `MAX_CLIENTS` connections are answered at once (one thread
each; more are closed at once, without a thread), and a connection is closed once it has had
`REQUEST_S` seconds, answered or not. Before, a connection that sent nothing held a thread for
ever, and a pod's few thousand connections took the node's threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from vgpu.adapters.bounded_http import BoundedServer
from vgpu.core.errors import ConfigError
from vgpu.node.allocation import AllocationPolicy
from vgpu.node.grants import ContainerGrant, Refusal

MAX_CLIENTS = 64  # connections answered at once; the kubelet's probes and a scraper need a few
KILL_SERIES_KEPT = 256
"""The most (namespace, pod, container) series `vgpu_watchdog_kills` keeps: the oldest go first,
so pods stopped and gone do not grow the agent and its output for good."""
REQUEST_S = 10.0  # a connection's whole life: the probes' own timeout is 5 s


class NodeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.allocations = Counter(
            "vgpu_node_allocations",
            "Allocate calls answered, by resource and outcome (granted/refused)",
            ["resource", "outcome"],
            registry=self.registry,
        )
        self.mismatches = Counter(
            "vgpu_node_assignment_mismatches",
            "Containers found holding device IDs that differ from their assignment",
            registry=self.registry,
        )
        self.pods = Gauge(
            "vgpu_node_pods", "vGPU pods bound to this node", ["state"], registry=self.registry
        )
        self.unhealthy = Gauge(
            "vgpu_node_unhealthy_gpus", "GPUs currently marked unhealthy", registry=self.registry
        )
        self.xids = Counter(
            "vgpu_gpu_xid_events",
            "Critical XID events by GPU (`unattributed`: no GPU named) and XID",
            ["gpu", "xid"],
            registry=self.registry,
        )
        self.findings = Counter(
            "vgpu_watchdog_findings",
            "Watchdog reports (rate-limited like their Events), by finding: over_grant, unknown",
            ["finding"],
            registry=self.registry,
        )
        self.kills = Counter(
            "vgpu_watchdog_kills",
            "Processes the watchdog stopped for using more GPU memory than granted",
            ["namespace", "pod", "container"],
            registry=self.registry,
        )
        self._killed: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._server: BoundedServer | None = None

    def killed(self, namespace: str, pod: str, container: str) -> None:
        """Count a process the watchdog stopped, keeping at most `KILL_SERIES_KEPT` series."""
        labels = (namespace, pod, container)
        self.kills.labels(*labels).inc()
        self._killed[labels] = None
        self._killed.move_to_end(labels)
        while len(self._killed) > KILL_SERIES_KEPT:
            oldest, _ = self._killed.popitem(last=False)
            self.kills.remove(*oldest)

    def serve(
        self,
        port: int,
        addr: str = "0.0.0.0",
        *,
        ready: Callable[[], bool] = lambda: True,
        live: Callable[[], str | None] = lambda: None,
        max_clients: int = MAX_CLIENTS,
        request_s: float = REQUEST_S,
    ) -> None:
        """Serve `/metrics`, `/healthz` (every loop runs: `live()` is None) and `/readyz`
        (`ready()` is true), to at most `max_clients` connections at once, each for at most
        `request_s` seconds (module doc)."""
        handler = _handler(self.registry, ready, live)
        try:
            server = BoundedServer(
                (addr, port), handler, max_clients, request_s, name="vgpu-metrics-reaper"
            )
        except OSError as e:
            raise ConfigError(
                f"--metrics-port: cannot listen on {addr}:{port}: {e.strerror or e}; pick a free "
                "port, or 0 to disable /metrics"
            ) from e
        threading.Thread(target=server.serve_forever, name="vgpu-metrics", daemon=True).start()
        self._server = server

    @property
    def port(self) -> int | None:
        """The port `/metrics` listens on (useful after `serve(0)`), None when not serving."""
        return None if self._server is None else int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler(
    registry: CollectorRegistry, ready: Callable[[], bool], live: Callable[[], str | None]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                dead = live()
                self._send(503 if dead else 200, f"{dead}\n".encode() if dead else b"ok\n")
            elif path == "/readyz":
                ok = ready()
                self._send(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
            else:
                self._send(404, b"try /metrics, /healthz or /readyz\n")

        def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # scrapes and probes are not worth a log line each

    return Handler


class CountingPolicy:
    """Wraps an `AllocationPolicy`, counting granted and refused Allocate calls."""

    def __init__(self, inner: AllocationPolicy, metrics: NodeMetrics) -> None:
        self.inner = inner
        self._metrics = metrics

    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        return self.inner.preferred(resource, available, must_include, size)

    def allocate(
        self, resource: str, container_ids: Sequence[Sequence[str]]
    ) -> list[ContainerGrant] | Refusal:
        result = self.inner.allocate(resource, container_ids)
        outcome = "refused" if isinstance(result, Refusal) else "granted"
        self._metrics.allocations.labels(resource, outcome).inc()
        return result
