"""The web view's server: read-only, safe headers, a failed read marks the data stale and the
view goes on, the generation moves only when what a page shows changed."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inspect.builders import pod
from tests.inspect.scenario import demo_cluster
from tests.web.conftest import Served
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.cli import configure
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.web.refresh import Refresher


def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.mark.parametrize("path", ["/", "/queues", "/node?name=gpu-a", "/pod?name=ml/bert-0",
                                  "/api/view.json", "/api/status.json", "/assets/view.js",
                                  "/assets/view.css"])  # fmt: skip
def test_every_page_answers_with_a_policy_that_allows_only_its_own_assets(
    served: Served, path: str
) -> None:
    code, headers, body = _get(served.url + path)
    assert code == 200 and body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_the_view_changes_nothing_other_methods_are_refused(served: Served, method: str) -> None:
    assert _get(served.url + "/", method)[0] == 501


def test_unknown_pages_and_pods_are_not_found(served: Served) -> None:
    assert _get(served.url + "/nothing")[0] == 404
    assert _get(served.url + "/pod?name=ml/nobody")[0] == 404
    assert _get(served.url + "/node?name=nowhere")[0] == 404


def test_the_stylesheet_has_every_fill_width(served: Served) -> None:
    css = _get(served.url + "/assets/view.css")[2].decode()
    assert ".w0{width:0%}" in css and ".w100{width:100%}" in css


def test_a_failed_read_keeps_the_last_view_and_says_it_is_stale(served: Served) -> None:
    served.path.write_text("{not json")
    served.refresher.refresh()
    status = json.loads(_get(served.url + "/api/status.json")[2])
    assert status["stale"] and "cluster.json" in status["error"]
    page = _get(served.url + "/")[2].decode()
    assert "gpu-a" in page and 'class="stale"' in page and "last read failed" in page


def test_a_new_pod_moves_the_generation_and_a_reread_of_the_same_does_not(served: Served) -> None:
    first = served.refresher.current()[1]["generation"]
    served.refresher.refresh()
    assert served.refresher.current()[1]["generation"] == first
    snapshot = demo_cluster()
    added = pod("default/new-one", node="gpu-a", asks={"main": (10, 0)},
                shares={"main": [(1, 10, 1024)]})  # fmt: skip
    served.save(dataclasses.replace(snapshot, pods=(*snapshot.pods, added)))
    assert served.refresher.current()[1]["generation"] == first + 1
    assert "default/new-one" in _get(served.url + "/node?name=gpu-a")[2].decode()


def test_data_older_than_three_intervals_is_stale() -> None:
    now = [1000.0]
    refresher = Refresher(lambda: (Snapshot((), (), (), ""), None), DEFAULT_NAMES, 5.0,
                          live=True, clock=lambda: now[0])  # fmt: skip
    assert refresher.current()[1]["stale"]  # never read
    refresher.refresh()
    assert not refresher.current()[1]["stale"]
    now[0] += 15.1
    assert refresher.current()[1]["stale"]


def test_serve_binds_localhost_unless_told_otherwise() -> None:
    import argparse

    args = configure(argparse.ArgumentParser()).parse_args(["--serve"])
    assert (args.address, args.port) == ("127.0.0.1", 8080)


def test_a_port_out_of_range_is_a_usage_error_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    with pytest.raises(SystemExit):
        configure(argparse.ArgumentParser()).parse_args(["--serve", "--port", "70000"])
    assert "--port" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "100000", str(10**20)])
def test_a_refresh_no_wait_can_take_is_a_usage_error_naming_the_flag(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--refresh 100000000000000000000` was taken: the refresh thread's first wait raised
    OverflowError (a traceback, then a view that never read the cluster again)."""
    import argparse

    with pytest.raises(SystemExit):
        configure(argparse.ArgumentParser()).parse_args(["--serve", "--refresh", value])
    err = capsys.readouterr().err
    assert "--refresh" in err and "86400" in err


@pytest.mark.parametrize(
    ("host", "loopback", "allowed"),
    [
        ("127.0.0.1:8080", True, True),
        ("localhost:8080", True, True),
        ("[::1]:8080", True, True),
        ("LOCALHOST", True, True),
        ("evil.example:8080", True, False),
        ("127.0.0.1.evil.example", True, False),
        (None, True, False),
        ("evil.example", False, True),  # bound for others (the chart's Service): their choice
    ],
)
def test_on_loopback_only_loopback_host_names_are_answered(
    host: str | None, loopback: bool, allowed: bool
) -> None:
    from vgpu.inspect.web.server import host_allowed

    assert host_allowed(host, loopback) is allowed


def test_a_page_asked_for_under_another_host_name_is_refused(served: Served) -> None:
    """A page that rebinds its own DNS name to 127.0.0.1 must not read the cluster through us."""
    request = urllib.request.Request(
        served.url + "/api/view.json", headers={"Host": "evil.example"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 421


def test_an_address_that_cannot_be_bound_is_one_line_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.inspect.scenario import demo_cluster as demo
    from vgpu.inspect.cli import main
    from vgpu.inspect.snapshot import dumps

    path = tmp_path / "c.json"
    path.write_text(dumps(demo(), as_json=True, names=DEFAULT_NAMES))
    assert (
        main(["--serve", "--fake-cluster", str(path), "--address", "192.0.2.1", "--port", "0"]) == 1
    )
    assert "--address" in capsys.readouterr().err


def test_an_unexpected_error_while_reading_is_reported_and_the_next_read_recovers() -> None:
    calls = []

    def read() -> tuple[Snapshot, str | None]:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the client library broke")
        return Snapshot((), (), (), ""), None

    refresher = Refresher(read, DEFAULT_NAMES, 5.0)
    refresher.refresh()
    refresher.refresh()
    status = refresher.current()[1]
    assert status["stale"] and status["error"] == "RuntimeError: the client library broke"
    refresher.refresh()
    assert not refresher.current()[1]["error"]


def _silent(port: int, count: int) -> list[socket.socket]:
    """`count` connections that send nothing, as any pod that reaches the Service can open."""
    return [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]


@contextlib.contextmanager
def _server(refresher: Refresher, request_s: float = 30.0) -> Iterator[int]:
    from vgpu.inspect.web.server import make_server

    server = make_server(refresher, "127.0.0.1", 0, request_s=request_s)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_silent_connections_do_not_grow_the_views_threads_past_a_bound(served: Served) -> None:
    """In the cluster the view listens on all addresses: a connection that sent nothing held
    one of its threads for ever, so a pod's few thousand took its threads and memory (the
    Deployment's 512 MiB) and its probes with them."""
    from vgpu.inspect.web.server import MAX_CLIENTS

    with _server(served.refresher) as port:
        before = threading.active_count()
        conns = _silent(port, 200)
        try:
            time.sleep(0.5)
            assert threading.active_count() - before <= MAX_CLIENTS
        finally:
            for conn in conns:
                conn.close()


def test_a_connection_that_does_not_finish_its_request_in_time_is_closed(served: Served) -> None:
    from vgpu.inspect.web.server import MAX_CLIENTS

    with _server(served.refresher, request_s=0.5) as port:
        conns = _silent(port, MAX_CLIENTS)
        conns[0].sendall(b"GET /api/vie")  # a request trickled, never finished
        for conn in conns:
            conn.settimeout(5)
            assert conn.recv(1024) == b""  # closed by the server, not by the test's timeout
            conn.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if _get(f"http://127.0.0.1:{port}/healthz")[0] == 200:
                    break
            time.sleep(0.1)
        assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
