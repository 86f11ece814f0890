"""The DRA driver's unix socket for the CDI hook (`vgpu-core/hook/vgpu-cdi-hook.c`): one request
per connection, read until the hook half-closes, answered with one line of text, then closed.

The hook runs in the container runtime on every container of a claim and the runtime waits
for it, so this server is on the path of every container start: a request is bounded in size
(`vgpu.dra.hook_request.MAX_REQUEST`) and in time (`read_s` for the whole request), at most
`max_clients` are served at once (more are answered "busy" at once, which fails that container
and the kubelet retries), and no input can end the server: whatever the answering function
raises becomes the answer. The answering function itself is the driver's
(`vgpu.daemons.dra_driver.hook`); this module only moves bytes.
"""

from __future__ import annotations

import logging
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path

from vgpu.dra.hook_request import MAX_ANSWER, MAX_REQUEST

log = logging.getLogger(__name__)
Answer = Callable[[bytes], str]


def read_request(conn: socket.socket, limit: int, read_s: float) -> bytes | str:
    """The bytes sent until the peer's half-close, or why not (over `limit`, past `read_s`)."""
    deadline, size = time.monotonic() + read_s, 0
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return f"the request took longer than {read_s:g} s"
        conn.settimeout(left)
        try:
            chunk = conn.recv(min(65536, limit + 1 - size))
        except TimeoutError:
            return f"the request took longer than {read_s:g} s"
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return f"the request is over the bound of {limit} bytes"


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn, server = self.request, self.server
        if not server.slots.acquire(blocking=False):
            _send(conn, f"busy: {server.max_clients} containers are being answered; retry")
            _drain(conn, server.max_request)
            return
        try:
            got = read_request(conn, server.max_request, server.read_s)
            _send(conn, got if isinstance(got, str) else _answer(server.answer, got))
        except OSError as e:  # the hook went away: nothing to answer
            log.debug("hook connection dropped: %s", e)
        finally:
            server.slots.release()


def _answer(answer: Answer, data: bytes) -> str:
    try:
        return answer(data)
    except Exception as e:  # a bug in answering one request must not end the server
        log.exception("answering the CDI hook failed")
        return f"the vgpu DRA driver failed to answer: {type(e).__name__}: {e}"


def _send(conn: socket.socket, text: str) -> None:
    data = text.encode("utf-8", "replace")[:MAX_ANSWER]
    try:
        conn.settimeout(1.0)
        conn.sendall(data)
    except OSError as e:
        log.debug("cannot answer the hook: %s", e)


def _drain(conn: socket.socket, limit: int, seconds: float = 0.25) -> None:
    """Read what the hook sent until it half-closes (it does so right after its request), at
    most `limit` bytes and `seconds`: a stream socket closed with unread data resets the
    peer's connection (ECONNRESET on its read), which would drop the answer just sent."""
    deadline = time.monotonic() + seconds
    try:
        conn.shutdown(socket.SHUT_WR)
        while limit > 0 and (left := deadline - time.monotonic()) > 0:
            conn.settimeout(left)
            chunk = conn.recv(min(limit, 65536))
            if not chunk:
                return
            limit -= len(chunk)
    except OSError as e:
        log.debug("hook connection dropped while answered busy: %s", e)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    answer: Answer
    read_s: float
    max_request: int
    max_clients: int
    slots: threading.BoundedSemaphore


class HookSocket:
    """The server on `path` (module doc); `start` replaces a stale socket file."""

    def __init__(
        self,
        path: Path,
        answer: Answer,
        *,
        read_s: float = 2.0,
        max_request: int = MAX_REQUEST,
        max_clients: int = 32,
    ) -> None:
        self.path, self._answer = path, answer
        self._read_s, self._max_request, self._max_clients = read_s, max_request, max_clients
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen (only root may connect: mode 0600) and serve on a thread; raises OSError."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        server = _Server(str(self.path), _Handler, bind_and_activate=False)
        server.answer, server.read_s = self._answer, self._read_s
        server.max_request, server.max_clients = self._max_request, self._max_clients
        server.slots = threading.BoundedSemaphore(self._max_clients)
        try:
            server.server_bind()
            os.chmod(self.path, 0o600)
            server.server_activate()
        except OSError:
            server.server_close()
            raise
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="vgpu-dra-hook"
        )
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and remove the socket; idempotent. A hook then fails: fail closed."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        self.path.unlink(missing_ok=True)
