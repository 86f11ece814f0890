"""The extender's HTTP/1.1 handling over real sockets: request line and header parsing,
keep-alive and close, 100-continue, and the errors for what kube-scheduler never sends."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.limits import HttpLimits


class _Routes:
    """Answers every verb with the body it got, so the tests see what the server read."""

    def __init__(self) -> None:
        self.metrics = self
        self.seen: list[tuple[str, bytes]] = []

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        self.seen.append((verb, body))
        return 200, b'{"echo":' + str(len(body)).encode() + b"}"

    def ready(self) -> str | None:
        return None

    def exposition(self) -> bytes:
        return b"# metrics\n"


LIMITS = HttpLimits(read_timeout=0.5, idle_timeout=1.0, workers=4)


@pytest.fixture
def server() -> Iterator[tuple[HttpServer, _Routes]]:
    routes = _Routes()
    http = HttpServer(routes, host="127.0.0.1", port=0, limits=LIMITS)  # type: ignore[arg-type]
    http.start()
    yield http, routes
    http.stop()


def _exchange(port: int, data: bytes, *, replies: int = 1) -> list[bytes]:
    """Send raw bytes, read `replies` HTTP responses (status line + headers + body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        stream = sock.makefile("rb")
        out = []
        for _ in range(replies):
            status = stream.readline()
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            out.append(status + stream.read(length))
        return out


def _post(body: bytes, *extra: str, version: str = "HTTP/1.1") -> bytes:
    head = [f"POST /scheduler/filter {version}", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def test_keep_alive_serves_several_requests_on_one_connection(server: Any) -> None:
    http, routes = server
    replies = _exchange(http.port, _post(b"{}") + _post(b"[1,2]"), replies=2)
    assert [r.split(b"\r\n")[0] for r in replies] == [b"HTTP/1.1 200 OK"] * 2
    assert replies[1].endswith(b'{"echo":5}')
    assert routes.seen == [("filter", b"{}"), ("filter", b"[1,2]")]


def test_header_names_are_case_insensitive(server: Any) -> None:
    http, routes = server
    raw = b"POST /filter HTTP/1.1\r\ncOnTeNt-LeNgTh: 4\r\nHost: x\r\n\r\nabcd"
    assert _exchange(http.port, raw)[0].endswith(b'{"echo":4}')
    assert routes.seen == [("filter", b"abcd")]


def test_connection_close_and_http_1_0_end_the_connection(server: Any) -> None:
    http, _ = server
    for request in (_post(b"{}", "Connection: close"), _post(b"{}", version="HTTP/1.0")):
        with socket.create_connection(("127.0.0.1", http.port), timeout=5) as sock:
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(65536):  # the server closes: recv returns b""
                data += chunk
            assert data.startswith(b"HTTP/1.") and data.endswith(b'{"echo":2}')


def test_expect_100_continue_is_answered_before_the_body(server: Any) -> None:
    http, _ = server
    with socket.create_connection(("127.0.0.1", http.port), timeout=5) as sock:
        sock.sendall(_post(b"", "Expect: 100-continue").replace(b"Length: 0", b"Length: 2"))
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(b"{}")
        assert b'{"echo":2}' in sock.recv(4096)


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST /filter\r\n\r\n", b"400"),
        (b"POST /filter HTTP/2.0\r\nContent-Length: 0\r\n\r\n", b"505"),
        (b"POST /filter HTTP/1.1\r\nno colon here\r\n\r\n", b"400"),
        (b"POST /filter HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", b"431"),
        (b"POST /filter HTTP/1.1\r\nContent-Length: -3\r\n\r\n", b"400"),
        (b"POST /filter HTTP/1.1\r\nContent-Length: many\r\n\r\n", b"400"),
        (b"POST /filter HTTP/1.1\r\n\r\n", b"411"),
        (b"POST /filter HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", b"411"),
        (b"POST /f HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", b"400"),
        (b"POST /f HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", b"400"),
        (b"POST /f HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", b"413"),
        (b"POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", b"400"),
        (b"POST /f HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
        (b"PUT /filter HTTP/1.1\r\nContent-Length: 0\r\n\r\n", b"405"),
        (b"POST /" + b"f" * 70000 + b" HTTP/1.1\r\n\r\n", b"414"),
        (b"POST /f HTTP/1.1\r\nContent-Length: \xb2\r\n\r\n", b"400"),  # found by atheris
    ],
)
def test_malformed_requests_get_an_error_status(server: Any, raw: bytes, status: bytes) -> None:
    http, routes = server
    assert _exchange(http.port, raw)[0].split(b" ")[1] == status
    assert routes.seen == []
    assert _exchange(http.port, _post(b"{}"))[0].endswith(b'{"echo":2}')  # still serving


def test_get_endpoints(server: Any) -> None:
    http, _ = server
    for path, body in (("/healthz", b"ok\n"), ("/readyz", b"ok\n"), ("/metrics", b"# metrics\n")):
        reply = _exchange(http.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())[0]
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(body)


def test_chunked_bodies_are_read_whole(server: Any) -> None:
    http, routes = server
    raw = (
        b"POST /scheduler/filter HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\n[1,\r\nA\r\n2,3,4,5,6]\r\n0\r\nTrailer: x\r\n\r\n"
    )
    replies = _exchange(http.port, raw + _post(b"{}"), replies=2)
    assert replies[0].endswith(b'{"echo":13}') and replies[1].endswith(b'{"echo":2}')
    assert routes.seen == [("filter", b"[1,2,3,4,5,6]"), ("filter", b"{}")]


def test_a_request_that_stalls_is_cut_off_after_the_read_timeout(server: Any) -> None:
    http, routes = server
    with socket.create_connection(("127.0.0.1", http.port), timeout=5) as sock:
        sock.sendall(b"POST /filter HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
        assert sock.recv(4096).startswith(b"HTTP/1.1 408")
        assert sock.recv(4096) == b""  # closed
    assert routes.seen == []


def test_an_idle_kept_alive_connection_is_closed_after_the_idle_timeout(server: Any) -> None:
    http, _ = server
    with socket.create_connection(("127.0.0.1", http.port), timeout=5) as sock:
        sock.sendall(_post(b"{}"))
        assert sock.recv(4096).endswith(b'{"echo":2}')
        started = time.monotonic()
        assert sock.recv(4096) == b""
        assert time.monotonic() - started >= LIMITS.idle_timeout * 0.9


def test_two_hundred_slow_clients_neither_stop_a_request_nor_hold_threads(server: Any) -> None:
    http, _ = server
    threads = threading.active_count()
    slow = []
    try:
        for _ in range(200):
            sock = socket.create_connection(("127.0.0.1", http.port), timeout=5)
            sock.sendall(b"POST /filter HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{")
            slow.append(sock)
        assert _exchange(http.port, _post(b"{}"))[0].endswith(b'{"echo":2}')
        assert threading.active_count() <= threads + LIMITS.workers
    finally:
        for sock in slow:
            sock.close()


def test_refusals_are_reported_by_reason() -> None:
    reasons: list[str] = []
    http = HttpServer(_Routes(), host="127.0.0.1", limits=LIMITS, on_refused=reasons.append)  # type: ignore[arg-type]
    http.start()
    try:
        _exchange(http.port, b"POST /filter HTTP/1.1\r\n\r\n")
        with socket.create_connection(("127.0.0.1", http.port), timeout=5) as sock:
            sock.sendall(b"POST /filter HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
            assert sock.recv(4096).startswith(b"HTTP/1.1 408")
        assert _exchange(http.port, _post(b"{}"))[0].endswith(b'{"echo":2}')
    finally:
        http.stop()
    assert reasons == ["malformed", "timeout"]


def test_each_accepted_connection_is_counted_once() -> None:
    accepted: list[None] = []
    http = HttpServer(
        _Routes(),  # type: ignore[arg-type]
        host="127.0.0.1",
        limits=LIMITS,
        on_connection=lambda: accepted.append(None),
    )
    http.start()
    try:
        _exchange(http.port, _post(b"{}") + _post(b"{}") + _post(b"{}"), replies=3)
        _exchange(http.port, _post(b"{}"))
    finally:
        http.stop()
    assert len(accepted) == 2  # three requests kept alive on one connection, one on another
