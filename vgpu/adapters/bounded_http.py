"""A `ThreadingHTTPServer` whose clients cost a bounded amount, for ports any pod may reach.

The standard library's server gives each connection a thread for as long as the client keeps
it open, so a connection that sends nothing held a thread for ever, and a pod's few thousand
took the process's threads and memory. Here at most `max_clients` connections are answered at
once (one thread each; more are closed at once, without a thread), and each is closed once it
has had `request_s` seconds, answered or not. Served by the node agent's metrics port and the
web view (`vgpu inspect --serve`).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any


class BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most `max_clients` at once, each cut after `request_s` by
    one reaper thread (not a timer per connection: that would double the threads)."""

    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 let a burst of connects drop the probes' SYNs

    def __init__(
        self,
        address: tuple[str, int],
        handler: Any,
        max_clients: int,
        request_s: float,
        *,
        name: str = "vgpu-http-reaper",
    ) -> None:
        self.slots = threading.BoundedSemaphore(max_clients)
        self.request_s = request_s
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        super().__init__(address, handler)  # a bind that fails calls server_close: state first
        threading.Thread(target=self._reap, name=name, daemon=True).start()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # over the bound: closed, no thread
            return
        with self._lock:
            self._deadlines[request] = time.monotonic() + self.request_s
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: socket.socket) -> None:
        with self._lock:
            self._deadlines.pop(request, None)
        self.slots.release()

    def _reap(self) -> None:
        """End each connection past its time: its thread's blocked read returns at once."""
        while not self._stopped.wait(min(0.25, self.request_s / 4)):
            now = time.monotonic()
            with self._lock:
                late = [conn for conn, deadline in self._deadlines.items() if deadline <= now]
            for conn in late:
                with contextlib.suppress(OSError):  # already closed
                    conn.shutdown(socket.SHUT_RDWR)

    def server_close(self) -> None:
        self._stopped.set()
        super().server_close()
