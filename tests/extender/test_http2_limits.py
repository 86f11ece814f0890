"""HTTP/2 streams keep HTTP/1.1's limits: a held bind does not hold up the filters multiplexed
beside it, a request must arrive whole in time and within the body limit, and an idle
connection is closed (GOAWAY). The real server over real TLS; verbs stubbed."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.extender.h2client import H2Client, tls_socket
from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.limits import HttpLimits
from vgpu.extender.server.tls import TlsFiles, server_context

LIMITS = HttpLimits(read_timeout=0.5, idle_timeout=1.0, workers=2, max_body=1000)


class _Routes:
    """Binds wait until released; the rest echo their verb."""

    def __init__(self) -> None:
        self.metrics = self
        self.release = threading.Event()

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        if verb == "bind":
            self.release.wait(30)
        if verb == "echo":
            return 200, body
        return 200, b'{"verb":"' + verb.encode() + b'"}'

    def ready(self) -> str | None:
        return None

    def exposition(self) -> bytes:
        return b""


@pytest.fixture
def served(certs: Path) -> Iterator[tuple[HttpServer, _Routes, list[str]]]:
    yield from _served(certs, LIMITS)


@pytest.fixture(scope="module")
def echoing(certs: Path) -> Iterator[tuple[HttpServer, _Routes, list[str]]]:
    yield from _served(certs, HttpLimits())


def _served(certs: Path, limits: HttpLimits) -> Iterator[tuple[HttpServer, _Routes, list[str]]]:
    routes, refused = _Routes(), list[str]()
    tls = server_context(
        TlsFiles(
            str(certs / "extender.crt"), str(certs / "extender.key"), str(certs / "client-ca.crt")
        )
    )
    server = HttpServer(
        routes,  # type: ignore[arg-type]
        host="127.0.0.1",
        tls=tls,
        limits=limits,
        on_refused=refused.append,
    )
    server.start()
    try:
        yield server, routes, refused
    finally:
        routes.release.set()
        server.stop()


def _client(served: tuple[HttpServer, _Routes, list[str]], certs: Path) -> H2Client:
    return H2Client(tls_socket(served[0].port, certs, certs, ["h2"]))


def test_a_held_bind_does_not_hold_up_the_filters_beside_it(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path
) -> None:
    _, routes, _ = served
    client = _client(served, certs)
    binds = [client.request("POST", "/scheduler/bind", b"{}") for _ in range(3)]
    filters = [client.request("POST", "/scheduler/filter", b"{}") for _ in range(5)]
    answered = client.wait(*filters)
    assert [bytes(r.body) for r in answered] == [b'{"verb":"filter"}'] * 5
    assert not any(client.responses[b].ended for b in binds)  # still held, answered later
    routes.release.set()
    assert {bytes(r.body) for r in client.wait(*binds)} == {b'{"verb":"bind"}'}


def test_a_request_that_does_not_arrive_in_time_gets_408(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path
) -> None:
    client = _client(served, certs)
    (late,) = client.wait(client.request("POST", "/scheduler/filter", hold=True))
    assert late.status == 408
    (on_time,) = client.wait(client.request("POST", "/scheduler/filter", b"{}"))
    assert on_time.status == 200  # the connection is still served
    assert served[2] == ["timeout"]


def test_a_body_over_the_limit_gets_413(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path
) -> None:
    client = _client(served, certs)
    (big,) = client.wait(client.request("POST", "/scheduler/filter", b"x" * 1001))
    assert big.status == 413
    (small,) = client.wait(client.request("POST", "/scheduler/filter", b"x" * 1000))
    assert small.status == 200
    assert served[2] == ["malformed"]


def test_an_idle_connection_gets_goaway(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path
) -> None:
    client = _client(served, certs)
    client.wait(client.request("GET", "/healthz"))
    start = time.monotonic()
    while client.terminated is None and client.read_once():
        pass
    assert client.terminated is not None
    assert time.monotonic() - start >= LIMITS.idle_timeout * 0.9


@settings(max_examples=25, deadline=None)
@given(size=st.integers(0, 300_000), window=st.integers(256, 70_000), seed=st.binary(max_size=64))
def test_any_body_passes_both_ways_through_any_window(
    echoing: tuple[HttpServer, _Routes, list[str]], certs: Path, size: int, window: int, seed: bytes
) -> None:
    """Uploads are acknowledged as read, replies wait for the client's window: whatever the
    sizes, what goes up comes back whole."""
    body = (seed or b"x") * (size // max(1, len(seed)) + 1)
    body = body[:size]
    client = H2Client(tls_socket(echoing[0].port, certs, certs, ["h2"]), window=window)
    try:
        (reply,) = client.wait(client.request("POST", "/scheduler/echo", body))
    finally:
        client.close()
    assert (reply.status, bytes(reply.body)) == (200, body)


def test_uploads_past_the_first_window_keep_flowing(
    echoing: tuple[HttpServer, _Routes, list[str]], certs: Path
) -> None:
    """The connection's receive window (1 MiB) is handed back as data is read."""
    client = H2Client(tls_socket(echoing[0].port, certs, certs, ["h2"]))
    body = bytes(range(256)) * 2000  # 512,000 bytes, three times on one connection
    for _ in range(3):
        (reply,) = client.wait(client.request("POST", "/scheduler/echo", body))
        assert (reply.status, len(reply.body)) == (200, len(body))
    client.close()


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@settings(max_examples=60, deadline=None)
@given(
    frames=st.lists(
        st.tuples(
            st.integers(0, 12), st.integers(0, 255), st.integers(0, 7), st.binary(max_size=40)
        ),
        max_size=6,
    )
)
def test_random_frames_end_at_most_their_connection(
    echoing: tuple[HttpServer, _Routes, list[str]],
    certs: Path,
    frames: list[tuple[int, int, int, bytes]],
) -> None:
    """Frames of any type, flags, stream and payload after a valid preface: the server answers
    or closes that connection, logs no error, and serves the next one."""
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    try:
        sock = tls_socket(echoing[0].port, certs, certs, ["h2"])
        wire = PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS
        for kind, flags, stream, payload in frames:
            head = (
                len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big")
            )
            wire += head + payload
        sock.sendall(wire)
        sock.settimeout(0.3)
        with contextlib.suppress(TimeoutError, OSError):
            while sock.recv(65536):
                pass
        sock.close()
        client = H2Client(tls_socket(echoing[0].port, certs, certs, ["h2"]))
        (health,) = client.wait(client.request("GET", "/healthz"))
        client.close()
        assert health.status == 200
        assert errors.seen == []
    finally:
        logging.getLogger().removeHandler(errors)
