"""With the shipped configuration the real kube-scheduler calls the extender once per vGPU pod.

The extender's filter passes the one node its policy scores best (`--filter-best 1`), the
shipped scheduler configuration has no prioritizeVerb, and kube-scheduler skips scoring when one
node is left (pkg/scheduler/schedule_one.go, schedulePod): filter and bind, never prioritize.
Counted from the extender's own `vgpu_extender_request_seconds_count{verb}` (filter,
prioritize, bind and preempt only), exactly: the fixture leaves no other pod in the cluster (all
test pods live in one namespace, emptied first), the count is read once no call has been answered
for a second (a deleted pod's scheduling cycle may still be finishing), and every pod fits, so
none is filtered again after a failed cycle or sent to preempt.
"""

from __future__ import annotations

import re
import ssl
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Rest

pytestmark = pytest.mark.realk8s

COUNT = re.compile(r'^vgpu_extender_request_seconds_count\{verb="(\w+)"\} (\S+)$', re.M)
CONNECTIONS = re.compile(r"^vgpu_extender_connections_total (\S+)$", re.M)


@pytest.fixture
def api(real_cluster: RealCluster) -> Iterator[Rest]:
    pods.delete_all(real_cluster.admin)
    yield real_cluster.admin
    pods.delete_all(real_cluster.admin)


def _metrics(cluster: RealCluster) -> str:
    """The leading extender's /metrics (this request is one more connection)."""
    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    url = f"https://127.0.0.1:{cluster.ports['extender']}/metrics"
    with urllib.request.urlopen(url, context=context, timeout=10) as reply:
        return str(reply.read().decode())


def _calls(cluster: RealCluster) -> dict[str, float]:
    """Requests per verb the leading extender has answered so far."""
    return {verb: float(value) for verb, value in COUNT.findall(_metrics(cluster))}


def _settled_calls(cluster: RealCluster) -> dict[str, float]:
    """`_calls` once two reads a second apart agree: no call in flight is left to count."""
    last = [_calls(cluster)]

    def settled() -> tuple[dict[str, float]] | None:
        time.sleep(1.0)
        now = _calls(cluster)
        same, last[0] = now == last[0], now
        return (now,) if same else None

    calls: tuple[dict[str, float]] = wait_until(settled, 60, "the extender's calls to settle")
    return calls[0]


def _connections(cluster: RealCluster) -> float:
    found = CONNECTIONS.search(_metrics(cluster))
    assert found, "vgpu_extender_connections_total not exported"
    return float(found.group(1))


def _run_pods(api: Rest, prefix: str, count: int, cores: int, memory: int) -> list[str]:
    """Create `count` vGPU pods and wait until each runs; their names."""
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        api.post(pods.PODS, pods.pod(name, pods.container("main", cores, memory)))
    for name in names:
        pods.wait_running(api, name)
    return names


def test_a_vgpu_pod_costs_one_filter_and_one_bind(real_cluster: RealCluster, api: Rest) -> None:
    before = _settled_calls(real_cluster)
    names = _run_pods(api, "one-call", 3, 30, 8)
    after = _settled_calls(real_cluster)
    added = {verb: after.get(verb, 0.0) - before.get(verb, 0.0) for verb in after}
    assert {verb: n for verb, n in added.items() if n} == {
        "filter": len(names),
        "bind": len(names),
    }, added


def test_kube_scheduler_keeps_one_connection(real_cluster: RealCluster, api: Rest) -> None:
    """kube-scheduler's client negotiates HTTP/2 with the extender (ALPN "h2") and multiplexes
    filters and the binds running beside them on one TLS connection. Over HTTP/1.1 it keeps at
    most 2 idle connections, so binds in flight made it open (and handshake) new ones, about one
    every few pods."""
    before = _connections(real_cluster)
    _run_pods(api, "one-conn", 16, 10, 2)
    added = _connections(real_cluster) - before
    assert added <= 3, f"{added} connections: the scrape, and at most 2 from kube-scheduler"
