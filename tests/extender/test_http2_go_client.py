"""A well-behaved kube-scheduler never spends a connection's budget. The real bench
(bench/real_scheduler_bench.py, 500 nodes) saw the extender end kube-scheduler's connection with
GOAWAY ENHANCE_YOUR_CALM after 143-281 streams, binds in flight. Here the real server over real
TLS is driven by `GoClient`, a model of Go's HTTP/2 transport written from its source
(tests/extender/gomodel.py), at the rates the budgets are meant to allow."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from h2.errors import ErrorCodes
from h2.settings import Settings

from tests.extender.gomodel import GoClient
from tests.extender.h2client import H2Client, tls_socket
from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.http2_budgets import Http2Caps
from vgpu.extender.server.limits import HttpLimits
from vgpu.extender.server.tls import TlsFiles, server_context

CAPS = Http2Caps()
CALM = ErrorCodes.ENHANCE_YOUR_CALM
REPLY = 9000
"""A filter reply at 500 nodes with one passing (`--filter-best 1`): the other 499 in
FailedNodes, each with its reason, is several KiB: two of Go's 4 KiB window refreshes."""


class _Routes:
    """Every verb answers `REPLY` bytes of JSON; binds wait until released."""

    def __init__(self) -> None:
        self.metrics = self
        self.release = threading.Event()

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        if verb == "bind":
            self.release.wait(30)
        return 200, b'{"v":"' + b"x" * (REPLY - 8) + b'"}'

    def ready(self) -> str | None:
        return None

    def exposition(self) -> bytes:
        return b""


@pytest.fixture
def served(certs: Path) -> Iterator[tuple[HttpServer, _Routes, list[str]]]:
    routes, refused = _Routes(), list[str]()
    files = TlsFiles(
        str(certs / "extender.crt"), str(certs / "extender.key"), str(certs / "client-ca.crt")
    )
    server = HttpServer(
        routes,  # type: ignore[arg-type]
        host="127.0.0.1",
        tls=server_context(files),
        limits=HttpLimits(http2=CAPS),
        on_refused=refused.append,
    )
    server.start()
    try:
        yield server, routes, refused
    finally:
        routes.release.set()
        server.stop()


def _go_client(server: HttpServer, certs: Path) -> GoClient:
    return GoClient(tls_socket(server.port, certs, certs, ["h2"]))


def test_a_go_client_reading_replies_and_closing_bodies_keeps_its_connection(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path
) -> None:
    """Pods scheduled as kube-scheduler does (a filter, then a bind, 20 binds in flight): each
    reply read returns its window in 4 KiB WINDOW_UPDATEs and each body is closed with a
    RST_STREAM(CANCEL). 400 pods, 800 streams: under the streams budget's burst, but twice the
    control budget's burst in WINDOW_UPDATEs and four times the resets budget's in resets."""
    server, routes, refused = served
    routes.release.set()
    client = _go_client(server, certs)
    for _ in range(20):
        streams = []
        for _ in range(20):
            streams.append(client.request("POST", "/scheduler/filter", b'{"Pod":{}}'))
            streams.append(client.request("POST", "/scheduler/bind", b'{"PodName":"p"}'))
        replies = client.wait(*streams)
        assert client.terminated is None, client.terminated
        assert [r.status for r in replies] == [200] * len(streams)
    assert client.resets_sent >= 2 * CAPS.resets.burst
    assert refused == []
    client.close()


@pytest.mark.parametrize(
    ("increment", "why"),
    [(1, "credit returned a byte at a time"), (1 << 16, "credit for DATA never sent")],
)
def test_window_updates_that_return_no_owed_credit_are_still_a_flood(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path, increment: int, why: str
) -> None:
    """What a Go client returns is free; 3,000 connection WINDOW_UPDATEs that are not owed,
    after one reply read, still spend the control budget."""
    server, _, refused = served
    client = _go_client(server, certs)
    (reply,) = client.wait(client.request("POST", "/scheduler/filter", b"{}"))
    assert reply.status == 200, why
    for _ in range(3000):
        client.h2.increment_flow_control_window(increment)
    client.flush()
    client.sock.settimeout(5)
    while client.terminated is None and client.read_once():
        pass
    assert client.terminated is not None and client.terminated.error_code == CALM, why
    assert refused == ["flood-control"], why


def test_streams_a_go_client_opens_before_it_has_our_settings_are_served(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path
) -> None:
    """Go's transport opens up to `initialMaxConcurrentStreams` (100) streams on a new
    connection before the server's SETTINGS arrive (x/net http2 transport.go): kube-scheduler
    redialling with binds waiting does. Our limit (64) applies once the client has acknowledged
    it (RFC 9113 §6.5.3); before that the streams over it are the protocol's race (§5.1.2):
    refused with REFUSED_STREAM, which Go retries, not a protocol error that ends the
    connection and every bind on it, and not charged to a budget."""
    server, routes, refused = served
    client = _go_client(server, certs)  # nothing read: our SETTINGS are not seen
    streams = [client.request("POST", "/scheduler/bind", b'{"PodName":"p"}') for _ in range(80)]
    time.sleep(0.5)  # the server reads all 80 while every bind is held open
    routes.release.set()
    client.wait(*streams)
    retried = [
        client.request("POST", "/scheduler/bind", b"{}") for s in streams if s in client.refused
    ]
    replies = client.wait(*[s for s in streams if s not in client.refused], *retried)
    assert client.terminated is None, client.terminated
    assert [r.status for r in replies] == [200] * len(streams)
    assert refused == []


def test_a_client_that_knows_our_limit_and_opens_streams_over_it_spends_its_resets(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path
) -> None:
    """Once our SETTINGS are acknowledged, each stream over the limit is refused and charged:
    a client opening them in a loop is cut (flood-resets), its held binds untouched."""
    server, _, refused = served
    client = H2Client(tls_socket(server.port, certs, certs, ["h2"]))
    (reply,) = client.wait(client.request("POST", "/scheduler/filter", b"{}"))  # SETTINGS acked
    assert reply.status == 200
    client.h2.remote_settings = Settings(client=False)  # ignore our limit from now on
    for _ in range(64):
        client.request("POST", "/scheduler/bind", b"{}")
    client.sock.settimeout(5)
    for _ in range(CAPS.resets.burst // 10 + 5):  # ten at a time, each batch refused in turn
        batch = client.wait(*[client.request("GET", "/healthz") for _ in range(10)])
        assert all(r.reset for r in batch) or client.terminated is not None
        if client.terminated is not None:
            break
    while client.terminated is None and client.read_once():
        pass
    assert client.terminated is not None and client.terminated.error_code == CALM
    assert refused == ["flood-resets"]
