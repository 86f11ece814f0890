"""The node agent's probe endpoints answer what they claim, over real HTTP."""

import socket
import threading
import time
import urllib.error
import urllib.request

from vgpu.agent.metrics import MAX_CLIENTS, NodeMetrics


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_readyz_follows_readiness_and_metrics_are_served() -> None:
    state = {"ready": False}
    metrics = NodeMetrics()
    metrics.serve(0, "127.0.0.1", ready=lambda: state["ready"])
    try:
        port = metrics.port
        assert port
        assert _get(port, "/healthz") == (200, "ok\n")
        assert _get(port, "/readyz")[0] == 503
        state["ready"] = True
        assert _get(port, "/readyz") == (200, "ready\n")
        metrics.allocations.labels("vgpu.io/cores", "granted").inc()
        code, body = _get(port, "/metrics")
        assert code == 200
        assert 'vgpu_node_allocations_total{outcome="granted",resource="vgpu.io/cores"} 1.0' in body
        assert _get(port, "/other")[0] == 404
    finally:
        metrics.close()
    assert metrics.port is None


def _idle(port: int, count: int) -> list[socket.socket]:
    """`count` connections that send nothing, as a pod on the network can open them."""
    conns = []
    for _ in range(count):
        conn = socket.create_connection(("127.0.0.1", port), timeout=5)
        conns.append(conn)
    return conns


def test_idle_connections_from_pods_do_not_grow_the_agents_threads_past_a_bound() -> None:
    """Any pod reaches the metrics port unless `networkPolicy.nodeAgent` is on; a connection
    that sends nothing held a thread of the agent for ever, so a pod's few thousand connections
    took the node's threads (and the agent's memory) with them."""
    metrics = NodeMetrics()
    metrics.serve(0, "127.0.0.1")
    port = metrics.port
    assert port
    before = threading.active_count()
    conns = _idle(port, 200)
    try:
        time.sleep(0.5)
        assert threading.active_count() - before <= MAX_CLIENTS
    finally:
        for conn in conns:
            conn.close()
        metrics.close()


def test_a_connection_that_does_not_finish_its_request_in_time_is_closed() -> None:
    metrics = NodeMetrics()
    metrics.serve(0, "127.0.0.1", request_s=0.5)
    port = metrics.port
    assert port
    try:
        conns = _idle(port, MAX_CLIENTS)
        conns[0].sendall(b"GET /metr")  # a request trickled, never finished
        for conn in conns:
            conn.settimeout(5)
            assert conn.recv(1024) == b""  # closed by the server, not by the test's timeout
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _get(port, "/healthz")[0] != 200:
            time.sleep(0.1)
        assert _get(port, "/healthz") == (200, "ok\n")
        for conn in conns:
            conn.close()
    finally:
        metrics.close()
