"""The node agent's probe endpoints answer what they claim, over real HTTP."""

import urllib.error
import urllib.request

from vgpu.agent.metrics import NodeMetrics


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
