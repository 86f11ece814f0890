"""A small blocking HTTP/2 client over real TLS (the `h2` library, client side), as Go's
net/http talks to the extender: ALPN "h2", many streams on one connection."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    PingAckReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
)
from h2.settings import SettingCodes, Settings


@dataclass
class Response:
    status: int = 0
    headers: dict[bytes, bytes] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    reset: bool = False
    ended: bool = False


def tls_socket(port: int, trust: Path, cert: Path | None, alpn: list[str]) -> ssl.SSLSocket:
    """A TLS connection to the extender, with kube-scheduler's certificate if `cert`."""
    context = ssl.create_default_context(cafile=str(trust / "server-ca.crt"))
    if cert is not None:
        context.load_cert_chain(str(cert / "scheduler.crt"), str(cert / "scheduler.key"))
    context.set_alpn_protocols(alpn)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return context.wrap_socket(raw, server_hostname="localhost")


class H2Client:
    """Requests go out at once; `wait` reads until the named streams are answered."""

    def __init__(self, sock: ssl.SSLSocket, *, window: int = 65535) -> None:
        assert sock.selected_alpn_protocol() == "h2", sock.selected_alpn_protocol()
        self.sock = sock
        self.h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.h2.local_settings = Settings(
            client=True, initial_values={SettingCodes.INITIAL_WINDOW_SIZE: window}
        )
        self.h2.initiate_connection()
        self.responses: dict[int, Response] = {}
        self.terminated: ConnectionTerminated | None = None
        self.ping_acks = 0
        self.flush()

    def request(self, method: str, path: str, body: bytes = b"", *, hold: bool = False) -> int:
        """Send a request; with `hold`, only its headers (the body never follows)."""
        stream_id = self.h2.get_next_available_stream_id()
        headers = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", path.encode()),
        ]
        if body:
            headers.append((b"content-length", str(len(body)).encode()))
        self.h2.send_headers(stream_id, headers, end_stream=not body and not hold)
        self.responses[stream_id] = Response()
        sent = 0
        while sent < len(body) and not hold:
            room = min(
                self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size
            )
            if room <= 0:
                self.flush()
                self.read_once()
                continue
            end = min(len(body), sent + room)
            self.h2.send_data(stream_id, body[sent:end], end_stream=end == len(body))
            sent = end
        self.flush()
        return stream_id

    def wait(self, *stream_ids: int) -> list[Response]:
        while not all(self._ended(s) for s in stream_ids) and self.terminated is None:
            if not self.read_once():
                break
        return [self.responses[s] for s in stream_ids]

    def _ended(self, stream_id: int) -> bool:
        response = self.responses[stream_id]
        return response.reset or response.ended

    def read_once(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        for event in self.h2.receive_data(data):
            self._event(event)
        self.flush()
        return True

    def _event(self, event: object) -> None:
        if isinstance(event, ResponseReceived):
            response = self.responses[event.stream_id or 0]
            response.headers.update((bytes(k), bytes(v)) for k, v in event.headers or [])
            response.status = int(response.headers[b":status"])
        elif isinstance(event, DataReceived):
            self.responses[event.stream_id or 0].body += event.data or b""
            self.h2.acknowledge_received_data(
                event.flow_controlled_length or 0, event.stream_id or 0
            )
        elif isinstance(event, StreamEnded):
            self.responses[event.stream_id or 0].ended = True
        elif isinstance(event, StreamReset):
            self.responses[event.stream_id or 0].reset = True
        elif isinstance(event, PingAckReceived):
            self.ping_acks += 1
        elif isinstance(event, ConnectionTerminated):
            self.terminated = event

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()
