"""The queues chart from Prometheus: the leader's series, cached, and the view's own samples
whenever Prometheus fails (the page says which)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from vgpu.adapters.prometheus import PrometheusError, query_range
from vgpu.inspect.web.shares import LEADER_SHARE, OWN, PrometheusShares


class FakePrometheus:
    """Answers /api/v1/query_range with `answer` (status, JSON body); records the queries."""

    def __init__(self) -> None:
        self.answer: tuple[int, Any] = (200, {})
        self.queries: list[dict[str, str]] = []


@pytest.fixture
def prometheus() -> Iterator[tuple[str, FakePrometheus]]:
    fake = FakePrometheus()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            fake.queries.append({k: v[0] for k, v in parse_qs(url.query).items()})
            code, body = fake.answer
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", fake
    server.shutdown()
    server.server_close()


def _matrix(*series: tuple[str, list[tuple[float, str]]]) -> dict[str, Any]:
    result = [
        {"metric": {"queue": q}, "values": [[t, v] for t, v in points]} for q, points in series
    ]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def test_the_chart_shows_the_leaders_last_hour_from_prometheus(
    prometheus: tuple[str, FakePrometheus],
) -> None:
    url, fake = prometheus
    fake.answer = (200, _matrix(("qa", [(100.0, "1"), (130.0, "0.5")]), ("qb", [(130.0, "NaN")])))
    shares = PrometheusShares(url, lambda: [], clock=lambda: 3700.0)
    samples, source = shares()
    assert list(samples) == [(100.0, {"qa": 1.0}), (130.0, {"qa": 0.5})]  # NaN left out
    assert "Prometheus" in source
    (query,) = fake.queries
    assert query["query"] == LEADER_SHARE and "vgpu_extender_leader == 1" in query["query"]
    assert (float(query["start"]), float(query["end"])) == (100.0, 3700.0)
    shares()
    assert len(fake.queries) == 1  # cached: one range query per 30 s, however many pages


def test_when_prometheus_fails_the_views_own_samples_are_shown_and_said(
    prometheus: tuple[str, FakePrometheus],
) -> None:
    url, fake = prometheus
    fake.answer = (500, {"status": "error", "error": "boom"})
    own = [(1.0, {"qa": 0.2})]
    samples, source = PrometheusShares(url, lambda: own)()
    assert samples == own
    assert "answered 500" in source and "own reads" in source and source != OWN


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, "'vector'"),
        ({"status": "error", "error": "parse error"}, "refused the query: parse error"),
    ],
)
def test_an_answer_that_is_not_a_matrix_is_one_error_line(
    prometheus: tuple[str, FakePrometheus], answer: dict[str, Any], message: str
) -> None:
    url, fake = prometheus
    fake.answer = (200, answer)
    with pytest.raises(PrometheusError, match=message):
        query_range(url, "up", 0, 1, 1)


def test_an_unreachable_prometheus_is_one_error_line() -> None:
    with pytest.raises(PrometheusError, match="cannot reach Prometheus"):
        query_range("http://127.0.0.1:9", "up", 0, 1, 1, timeout_s=2)


def test_a_prometheus_flag_that_is_not_a_url_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.inspect.scenario import demo_cluster
    from vgpu.api.resources import DEFAULT_NAMES
    from vgpu.inspect.cli import main
    from vgpu.inspect.snapshot import dumps

    path = tmp_path / "c.json"
    path.write_text(dumps(demo_cluster(), as_json=True, names=DEFAULT_NAMES))
    argv = ["--serve", "--fake-cluster", str(path), "--port", "0", "--prometheus", "prom:9090"]
    assert main(argv) == 1
    assert "--prometheus" in capsys.readouterr().err


def test_the_queues_page_draws_prometheus_samples_and_names_their_source(
    prometheus: tuple[str, FakePrometheus],
) -> None:
    from tests.web.sample import queue_cluster
    from vgpu.api.resources import DEFAULT_NAMES
    from vgpu.inspect.web.refresh import Refresher
    from vgpu.inspect.web.server import route

    url, fake = prometheus
    fake.answer = (200, _matrix(("qa", [(1.0, "1"), (31.0, "1.2")]), ("qb", [(31.0, "0")])))
    refresher = Refresher(lambda: queue_cluster(), DEFAULT_NAMES, 5.0, live=False)
    refresher.refresh()
    page = route(refresher, "/queues", {}, PrometheusShares(url, refresher.samples))[2].decode()
    assert 'id="share-chart"' in page and "<title>qa</title>" in page
    assert "vgpu_extender_queue_share in Prometheus" in page
