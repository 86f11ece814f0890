"""Filter and prioritize are answered while every worker thread is held by a bind waiting on the
API server: kube-scheduler's serial scheduling cycle does not queue behind its own binds."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.limits import HttpLimits

LIMITS = HttpLimits(read_timeout=2.0, idle_timeout=5.0, workers=2)


class _Routes:
    """Binds wait until released, as on an API server that does not answer; the rest echo."""

    def __init__(self) -> None:
        self.metrics = self
        self.release = threading.Event()
        self.binds = threading.Semaphore(0)

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        if verb == "bind":
            self.binds.release()
            self.release.wait(30)
        return 200, b'{"verb":"' + verb.encode() + b'"}'

    def ready(self) -> str | None:
        return None

    def exposition(self) -> bytes:
        return b""


@pytest.fixture
def server() -> Iterator[tuple[HttpServer, _Routes]]:
    routes = _Routes()
    served = HttpServer(routes, host="127.0.0.1", port=0, limits=LIMITS)  # type: ignore[arg-type]
    served.start()
    try:
        yield served, routes
    finally:
        routes.release.set()  # the held binds end before the server stops
        served.stop()


def _request(verb: str) -> bytes:
    return f"POST /scheduler/{verb} HTTP/1.1\r\nContent-Length: 2\r\n\r\n{{}}".encode()


def _open(port: int, verb: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(_request(verb))
    return sock


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_answered_while_every_worker_waits_in_a_bind(server: Any, verb: str) -> None:
    http, routes = server
    held = [_open(http.port, "bind") for _ in range(LIMITS.workers + 1)]
    try:
        for _ in range(LIMITS.workers):  # every worker is inside a bind
            assert routes.binds.acquire(timeout=5)
        with _open(http.port, verb) as sock:
            reply = sock.recv(4096)  # times out (5 s) if the verb waits for a worker
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(f'{{"verb":"{verb}"}}'.encode())
    finally:
        routes.release.set()
        for sock in held:
            sock.close()
