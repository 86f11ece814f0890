"""A TCP stand-in for the extender's Service: new connections go to the replica that is ready
(the lease holder, the only one whose /readyz is 200), established ones stay where they are, as
with kube-proxy. TLS passes through untouched, so kube-scheduler still checks the extender's
certificate and the extender still checks kube-scheduler's."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Self


class Listener:
    """Accepts connections on 127.0.0.1:`port` on a thread of its own and hands each to
    `_connect` on a thread of its own, until `stop`."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._server = socket.create_server(("127.0.0.1", port))
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="test-proxy", daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        raise NotImplementedError


class ServiceProxy(Listener):
    """Listen on 127.0.0.1:`port`; `backend()` names the port of the ready replica (None: no
    replica is ready, and the connection is closed at once, as with no endpoints)."""

    def __init__(self, port: int, backend: Callable[[], int | None]) -> None:
        super().__init__(port)
        self._backend = backend
        self.routed: dict[int, int] = {}  # backend port -> connections sent there

    def _connect(self, client: socket.socket) -> None:
        port = self._backend()
        try:
            if port is None:
                raise ConnectionRefusedError
            upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        self.routed[port] = self.routed.get(port, 0) + 1
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until either side closes; then close both."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.close()
