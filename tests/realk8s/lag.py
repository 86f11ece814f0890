"""A TCP stand-in for a slow path from the API server to one client: what the client sends passes
at once, what the server sends back arrives `lag` seconds late, in order. TLS passes through
untouched (the client still checks the API server's certificate), so a component pointed at it
sees every response and watch event late, as a client whose watch falls behind another's does:
kube-scheduler's informer and the extender's pod watch are two streams, and nothing orders one
against the other."""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time

from tests.realk8s.processes import free_port
from tests.realk8s.proxy import Listener

CHUNK = 65536


class LaggingProxy(Listener):
    """Listen on 127.0.0.1 (`port`); each connection goes to 127.0.0.1:`upstream`."""

    def __init__(self, upstream: int, lag: float) -> None:
        super().__init__(free_port())
        self.upstream, self.lag = upstream, lag

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        held: queue.Queue[tuple[float, bytes]] = queue.Queue()
        threading.Thread(target=_hold, args=(upstream, held, self.lag), daemon=True).start()
        threading.Thread(target=_release, args=(held, client), daemon=True).start()
        _pump(client, upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Client to server, at once."""
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _hold(source: socket.socket, held: queue.Queue[tuple[float, bytes]], lag: float) -> None:
    """Server to client: each chunk stamped with when it may go; b"" marks the end."""
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            held.put((time.monotonic() + lag, data))
    held.put((time.monotonic() + lag, b""))


def _release(held: queue.Queue[tuple[float, bytes]], sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while True:
            due, data = held.get()
            time.sleep(max(0.0, due - time.monotonic()))
            if not data:
                break
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
