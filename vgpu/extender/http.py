"""The extender's HTTP server: POST filter / prioritize / bind / preempt, GET /healthz /readyz
/metrics.

A stdlib `ThreadingHTTPServer` speaking HTTP/1.1 with keep-alive (kube-scheduler reuses
connections). The verbs are matched on the last path segment, so any `urlPrefix` works
(`/scheduler/filter`, `/filter`). Malformed requests get 400 with a message; verb failures go back
in-band (`Error`) with 200, as kube-scheduler expects; an unexpected exception is logged and
answered 500, never crashing the server. Bodies are capped.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vgpu.core.errors import InvalidRequest
from vgpu.extender.binder import Binder
from vgpu.extender.metrics import ExtenderMetrics
from vgpu.extender.podspec import key_of
from vgpu.extender.preemption import Preemptor, encode_preemption, parse_preemption_args
from vgpu.extender.service import Extender
from vgpu.extender.wire import (
    BadRequest,
    NamesMemo,
    encode_binding_result,
    encode_filter,
    encode_priorities,
    parse_binding_args,
    parse_extender_args,
)

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024 * 1024
MAX_HEADERS = 100
JSON = "application/json"


class Routes:
    """What the handler calls; built by the composition root."""

    def __init__(
        self,
        extender: Extender,
        binder: Binder,
        metrics: ExtenderMetrics,
        *,
        ready: Callable[[], str | None],
    ) -> None:
        self.extender = extender
        self.binder = binder
        self.metrics = metrics
        self.ready = ready
        """None when ready to serve, else why not."""
        self.preemptor = Preemptor(extender)
        self._observe = {
            v: metrics.observer(v) for v in ("filter", "prioritize", "bind", "preempt")
        }
        self._filter_names = NamesMemo()
        """Filter requests repeat their node names from one pod to the next."""
        self._prioritize_names = NamesMemo(learn=False)
        """Prioritize requests name the last filter reply's survivors."""

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        """Serve one verb; (status, JSON body)."""
        start = time.perf_counter()
        try:
            if verb == "filter":
                args = parse_extender_args(body, self._filter_names)
                result = self.extender.filter(args)
                if args.nodes is None:
                    self._prioritize_names.expect(result.passed)
                return 200, encode_filter(result, args.nodes)
            if verb == "prioritize":
                args = parse_extender_args(body, self._prioritize_names)
                return 200, encode_priorities(self.extender.prioritize(args))
            if verb == "preempt":
                return self._preempt(body)
            if verb == "bind":
                error = self.binder.bind(parse_binding_args(body))
                self.metrics.binds.labels("error" if error else "ok").inc()
                return 200, encode_binding_result(error)
            return 404, _message(f"unknown verb {verb!r}; use filter, prioritize, bind or preempt")
        finally:
            if verb in self._observe:
                self._observe[verb](time.perf_counter() - start)

    def _preempt(self, body: bytes) -> tuple[int, bytes]:
        """The preempt verb; an invalid pod is a 400 (kube-scheduler then drops the attempt)."""
        args = parse_preemption_args(body)
        try:
            return 200, encode_preemption(self.preemptor.preempt(args))
        except InvalidRequest as err:
            return 400, _message(f"preempt: pod {key_of(args.pod)}: {err}")


def _message(text: str) -> bytes:
    return (text + "\n").encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: Routes

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Buffered writes: headers and a small body leave in one segment (the base class flushes
    # after each request).
    wbufsize = -1
    server: _Server
    fields: dict[str, str]
    raw_requestline: bytes

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle + delayed ACK
        # add up to 40 ms per reply on a keep-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def parse_request(self) -> bool:
        """The request line and headers, without the `email` parser the base class uses (a
        tenth of a millisecond per request, three requests per pod scheduled). Sets `fields`
        (lower-case names) and `close_connection`; answers 400/431/505 itself."""
        words = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n").split()
        self.requestline = " ".join(words)
        self.command, self.request_version = "", "HTTP/1.1"
        if len(words) != 3:
            self.send_error(400, "bad request line")
            return False
        self.command, self.path, version = words
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            self.send_error(505, f"HTTP version {version!r} is not supported")
            return False
        self.request_version = version
        fields: dict[str, str] = {}
        for _ in range(MAX_HEADERS):
            line = self.rfile.readline(65537)
            if line in (b"\r\n", b"\n", b""):
                break
            name, colon, value = str(line, "iso-8859-1").partition(":")
            if not colon or not name.strip():
                self.send_error(400, "bad header line")
                return False
            fields[name.strip().lower()] = value.strip()
        else:
            self.send_error(431, "too many header fields")
            return False
        self.fields = fields
        token = fields.get("connection", "").lower()
        self.close_connection = token == "close" or (
            version == "HTTP/1.0" and token != "keep-alive"
        )
        if fields.get("expect", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.flush()
        return True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        routes = self.server.routes
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/healthz"):
            self._reply(200, b"ok\n", "text/plain")
        elif path.endswith("/readyz"):
            why = routes.ready()
            self._reply(503 if why else 200, _message(why or "ok"), "text/plain")
        elif path.endswith("/metrics"):
            self._reply(200, routes.metrics.exposition(), "text/plain; version=0.0.4")
        else:
            self._reply(404, b"not found\n", "text/plain")

    def do_POST(self) -> None:
        try:
            length = int(self.fields.get("content-length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self._reply(400 if length < 0 else 413, b"bad Content-Length\n", "text/plain")
            return
        body = self.rfile.read(length)
        verb = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        try:
            status, payload = self.server.routes.post(verb, body)
            self._reply(status, payload, JSON if status == 200 else "text/plain")
        except BadRequest as err:
            self._reply(400, _message(f"{verb}: {err}"), "text/plain")
        except Exception as err:
            log.exception("%s failed", verb)
            self._reply(500, _message(f"{verb}: internal error: {err}"), "text/plain")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HttpServer:
    """The listening server; `start()` serves on a thread, `port` is the bound port."""

    def __init__(self, routes: Routes, *, host: str = "0.0.0.0", port: int = 0) -> None:
        self._server = _Server((host, port), _Handler)
        self._server.routes = routes
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="vgpu-extender-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
