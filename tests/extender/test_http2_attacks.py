"""HTTP/2 clients, with or without the scheduler's certificate, can neither
hold the probes nor starve the filter. Each attack as the hostile tester ran it, against the real
server over real TLS (verbs stubbed, counting what they were asked to do)."""

from __future__ import annotations

import contextlib
import http.client
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from h2.errors import ErrorCodes

from tests.extender.h2client import H2Client, tls_socket
from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.http2_budgets import Http2Caps, Rate
from vgpu.extender.server.limits import HttpLimits
from vgpu.extender.server.tls import TlsFiles, server_context

CAPS = Http2Caps(streams=Rate(100, 10.0), resets=Rate(20, 2.0), control=Rate(50, 5.0))
LIMITS = HttpLimits(
    read_timeout=1.0,
    idle_timeout=5.0,
    workers=2,
    max_unverified=4,
    max_buffered=300_000,
    http2=CAPS,
)
CALM = ErrorCodes.ENHANCE_YOUR_CALM


class _Routes:
    """Binds wait until released, /metrics takes 10 ms; every call is counted."""

    def __init__(self) -> None:
        self.metrics = self
        self.release = threading.Event()
        self.calls: Counter[str] = Counter()

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        self.calls[verb] += 1
        if verb == "bind":
            self.release.wait(30)
        return 200, body if verb == "echo" else b'{"verb":"' + verb.encode() + b'"}'

    def ready(self) -> str | None:
        return None

    def exposition(self) -> bytes:
        self.calls["metrics"] += 1
        time.sleep(0.01)
        return b"# metrics\n"


@dataclass
class Served:
    server: HttpServer
    probes: HttpServer
    routes: _Routes
    refused: list[str]
    certs: Path

    def client(self, *, verified: bool = True, window: int = 65535) -> H2Client:
        cert = self.certs if verified else None
        sock = tls_socket(self.server.port, self.certs, cert, ["h2"])
        return H2Client(sock, window=window)


@pytest.fixture
def served(certs: Path) -> Iterator[Served]:
    routes, refused = _Routes(), list[str]()
    files = TlsFiles(
        str(certs / "extender.crt"), str(certs / "extender.key"), str(certs / "client-ca.crt")
    )
    server = HttpServer(
        routes,  # type: ignore[arg-type]
        host="127.0.0.1",
        tls=server_context(files),
        limits=LIMITS,
        on_refused=refused.append,
    )
    probes = HttpServer(routes, host="127.0.0.1", probes_only=True)  # type: ignore[arg-type]
    server.start()
    probes.start()
    try:
        yield Served(server, probes, routes, refused, certs)
    finally:
        routes.release.set()
        server.stop()
        probes.stop()


def _until_closed(client: H2Client, seconds: float) -> float:
    """Read (and answer nothing) until the server ends the connection; how long it took, or
    `seconds` when it did not end meanwhile."""
    start = time.monotonic()
    client.sock.settimeout(0.2)
    while time.monotonic() - start < seconds:
        try:
            if not client.read_once():
                return time.monotonic() - start
        except TimeoutError:
            continue
        except (OSError, ssl.SSLError):
            return time.monotonic() - start
    return seconds


def _still_serves(served: Served) -> None:
    client = served.client()
    (reply,) = client.wait(client.request("POST", "/scheduler/filter", b"{}"))
    client.close()
    assert reply.status == 200


def _probe(port: int, path: str = "/readyz") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def test_an_unverified_connection_kept_alive_by_pings_is_closed_at_its_deadline(
    served: Served,
) -> None:
    """(2): a PING every 0.3 s used to restart the read timeout for good."""
    client = served.client(verified=False)
    client.sock.settimeout(0.3)
    start = time.monotonic()
    closed = False
    while not closed and time.monotonic() - start < 4 * LIMITS.read_timeout:
        client.h2.ping(b"12345678")
        client.flush()
        with contextlib.suppress(TimeoutError):
            closed = not client.read_once() or client.terminated is not None
    assert closed, "the stranger's connection outlived its deadline"
    assert time.monotonic() - start < 2 * LIMITS.read_timeout
    _still_serves(served)


def test_probes_are_answered_on_their_own_port_while_strangers_hold_the_main_one(
    served: Served,
) -> None:
    """(2): strangers filling every unverified slot of the main port leave the probe port be."""
    strangers = [served.client(verified=False) for _ in range(LIMITS.max_unverified)]
    with pytest.raises((OSError, ssl.SSLError)):  # the main port's slots are full
        extra = served.client(verified=False)
        if not extra.read_once():
            raise ConnectionResetError("closed at once")
    assert _probe(served.probes.port, "/readyz") == 200
    assert _probe(served.probes.port, "/healthz") == 200
    for stranger in strangers:
        stranger.close()


def test_the_probe_port_answers_probes_and_nothing_else(served: Served) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served.probes.port, timeout=5)
    conn.request("POST", "/scheduler/bind", b"{}", {"Content-Type": "application/json"})
    reply = conn.getresponse()
    assert reply.status == 403 and b"main port" in reply.read()
    assert _probe(served.probes.port, "/metrics") == 404
    assert served.routes.calls == Counter()


def test_unverified_headers_and_resets_queue_no_work(served: Served) -> None:
    """(3): 100 x (HEADERS GET /metrics + RST_STREAM) in one write queued 100 expositions on the
    verb pool, none cancelled."""
    client = served.client(verified=False)
    for _ in range(100):
        stream_id = client.h2.get_next_available_stream_id()
        client.h2.send_headers(stream_id, _get("/metrics"), end_stream=True)
        client.h2.reset_stream(stream_id)
    client.flush()
    _until_closed(client, 3)
    time.sleep(0.3)  # what was queued would run now
    assert served.routes.calls["metrics"] <= 1
    _still_serves(served)


@pytest.mark.parametrize("verified", [False, True], ids=["unverified", "verified"])
@pytest.mark.parametrize("frame", ["ping", "settings"])
def test_control_frame_floods_with_replies_never_read_are_cut(
    served: Served, verified: bool, frame: str
) -> None:
    """(3): 3,000 PINGs (or SETTINGS) in one write, nothing read meanwhile: the server stops
    answering once the connection's budget is spent, and says why (GOAWAY ENHANCE_YOUR_CALM)."""
    client = served.client(verified=verified)
    for i in range(3000):
        if frame == "ping":
            client.h2.ping(i.to_bytes(8, "big"))
        else:
            client.h2.update_settings({4: 65535 + i % 2})  # INITIAL_WINDOW_SIZE
    client.flush()
    _until_closed(client, 3)
    assert client.terminated is not None and client.terminated.error_code == CALM
    assert client.ping_acks <= CAPS.control.burst + 10
    assert "flood-control" in served.refused
    _still_serves(served)


def test_rapid_reset_with_a_verified_client_is_cut_and_its_queued_work_cancelled(
    served: Served,
) -> None:
    """(3): binds opened and reset at once were all queued and all run (78,800 in 15 s)."""
    client = served.client()
    for _ in range(200):
        stream_id = client.h2.get_next_available_stream_id()
        client.h2.send_headers(stream_id, _post("/scheduler/bind", 2))
        client.h2.send_data(stream_id, b"{}", end_stream=True)
        client.h2.reset_stream(stream_id)
    client.flush()
    _until_closed(client, 3)
    assert client.terminated is not None and client.terminated.error_code == CALM
    assert "flood-resets" in served.refused
    served.routes.release.set()
    time.sleep(0.5)  # queued binds would run now
    assert served.routes.calls["bind"] <= LIMITS.workers
    _still_serves(served)


def test_a_verified_client_opening_streams_faster_than_its_budget_gets_goaway(
    served: Served,
) -> None:
    client = served.client()
    answered, start = 0, time.monotonic()
    try:
        for _ in range(4):  # 160 requests at once, 40 at a time (under the 64 open streams)
            replies = client.wait(*[client.request("GET", "/healthz") for _ in range(40)])
            answered += sum(r.status == 200 for r in replies)
            if client.terminated is not None:
                break
    except (OSError, ssl.SSLError):
        pass  # the server closed while the client was still writing: its GOAWAY may go unread
    _until_closed(client, 2)
    assert "flood-streams" in served.refused
    assert client.terminated is None or client.terminated.error_code == CALM
    refilled = CAPS.streams.per_second * (time.monotonic() - start)  # the bucket's rate
    assert answered <= CAPS.streams.burst + refilled
    _still_serves(served)


def test_a_zero_window_client_cannot_grow_the_servers_buffers(served: Served) -> None:
    """(3): replies held for a client that never opens its window grew RSS past the limit."""
    client = served.client(window=0)
    for _ in range(10):
        client.request("POST", "/scheduler/echo", b"x" * 50_000)
    took = _until_closed(client, 3)
    assert client.terminated is not None and client.terminated.error_code == CALM
    assert took < LIMITS.read_timeout
    assert "buffered" in served.refused
    _still_serves(served)


def _get(path: str) -> list[tuple[bytes, bytes]]:
    return [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"x"), (b":path", path.encode())]  # fmt: skip


def _post(path: str, length: int) -> list[tuple[bytes, bytes]]:
    head = [(b":method", b"POST"), (b":scheme", b"https"), (b":authority", b"x"), (b":path", path.encode())]  # fmt: skip
    return [*head, (b"content-length", str(length).encode())]
