"""The extender's HTTP server: POST filter / prioritize / bind / preempt, GET /healthz /readyz
/metrics.

HTTP/1.1 with keep-alive (kube-scheduler reuses connections), optionally over TLS; over TLS
also HTTP/2 (ALPN "h2", `vgpu.extender.server.http2`), which kube-scheduler's Go client prefers: it then
multiplexes every call on one connection instead of opening new ones (new TLS handshakes) while
binds are in flight. The verbs are
matched on the last path segment, so any `urlPrefix` works (`/scheduler/filter`, `/filter`).
Malformed requests get 4xx with a message; which thread makes a request's reply, and how verb
failures are answered, is `vgpu.extender.server.dispatch`'s; nothing a client sends crashes the
server.

Connections are served by one asyncio loop, so a client that sends slowly, or connects and waits,
costs a coroutine and a buffer, not a thread: a request must arrive whole within
`read_timeout`, a kept-alive connection may idle `idle_timeout` (longer than Go's 90 s
IdleConnTimeout, so kube-scheduler's client closes first and never races a server close on a
POST it would not retry), and at most `max_connections` are open. Complete requests run on a
pool of `workers` threads (the verbs take the cache lock; bind waits on the API server), except
filter and prioritize, answered on the loop's thread unless they would wait
(`vgpu.extender.server.dispatch`).

With TLS, verbs are answered only for a client that presented a certificate from the configured
CA (`vgpu.extender.server.tls`); /healthz, /readyz and /metrics need none (kubelet probes send none).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

from vgpu.extender.routes import Routes, message
from vgpu.extender.server.dispatch import PROBES_ONLY, Replier
from vgpu.extender.server.http1_request import (
    MAX_LINE,
    NO_CERTIFICATE,
    TEXT,
    Head,
    HttpError,
    Reply,
    read_body,
    read_head,
)
from vgpu.extender.server.http2 import Http2Connection
from vgpu.extender.server.limits import HttpLimits

log = logging.getLogger(__name__)


DEFAULT_LIMITS = HttpLimits()


class HttpServer:
    """The listening server; `start()` serves on a thread, `port` is the bound port."""

    def __init__(
        self,
        routes: Routes,
        *,
        host: str = "0.0.0.0",
        port: int = 0,
        tls: ssl.SSLContext | None = None,
        limits: HttpLimits = DEFAULT_LIMITS,
        on_refused: Callable[[str], None] = lambda reason: None,
        on_connection: Callable[[], None] = lambda: None,
        probes_only: bool = False,
    ) -> None:
        self.routes, self.limits, self._tls = routes, limits, tls
        self.probes_only = probes_only
        """Serve GET /healthz and /readyz only, every connection as one without a certificate:
        the probe port, on its own loop, where strangers on the main port cannot starve it."""
        self.on_refused = on_refused
        """Called with why a request or connection was refused (a metric's label)."""
        self.on_connection = on_connection
        """Called for each connection accepted (over TLS: after a full handshake). kube-scheduler's
        extender client keeps at most 2 idle connections (pkg/scheduler/extender.go builds its
        transport with apimachinery's SetTransportDefaults, which leaves Go's default
        MaxIdleConnsPerHost) and resumes no TLS session (client-go's TLS config sets no session
        cache), so binds running beside filter and prioritize keep opening new connections."""
        self._address = (host, port)
        self._pool = ThreadPoolExecutor(limits.workers, thread_name_prefix="vgpu-extender-verb")
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(_quiet)
        self._replier = Replier(routes, self._loop, self._pool, probes_only=probes_only)
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._http2: dict[asyncio.StreamWriter, Http2Connection] = {}
        self._unverified = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    def start(self) -> None:
        """Bind, then serve in a background thread."""
        host, port = self._address
        self._server = self._loop.run_until_complete(
            asyncio.start_server(
                self._connection,
                host,
                port,
                ssl=self._tls,
                ssl_handshake_timeout=self.limits.read_timeout if self._tls else None,
                limit=MAX_LINE,
                backlog=1024,
            )
        )
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="vgpu-extender-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket (again: nothing)."""
        if self._loop.is_closed():
            return
        if self._server is not None and self._thread is not None:
            done = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
            done.result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        http2 = [self._http2[w] for w in self._open if w in self._http2]
        for writer in list(self._open):
            if writer not in self._http2:
                writer.transport.abort()
        for connection in http2:  # HTTP/2 clients are told (GOAWAY) before the socket closes
            connection.goaway()
        if self._tasks:  # the connections' tasks end at their next read
            _, late = await asyncio.wait(list(self._tasks), timeout=1)
            for task in late:
                task.cancel()
        for connection in http2:
            connection.abort()

    # -- one connection --------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.on_connection()
        verified = not self.probes_only and (
            self._tls is None or bool(writer.get_extra_info("peercert"))
        )
        if len(self._open) >= self.limits.max_connections or (
            not verified and self._unverified >= self.limits.max_unverified
        ):
            self.on_refused("too-many-connections")
            writer.transport.abort()
            return
        self._open.add(writer)
        self._unverified += not verified
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Headers and body go out together, but without NODELAY Nagle + delayed ACK can
            # still add up to 40 ms per reply on a keep-alive connection.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if _alpn(writer) == "h2":
                await self._serve_http2(reader, writer, verified)
            else:
                while await self._exchange(reader, writer, verified):
                    pass
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError):
            pass  # the client went away or stalled: nothing to answer
        finally:
            self._open.discard(writer)
            self._http2.pop(writer, None)
            self._unverified -= not verified
            self._tasks.discard(task)
            writer.close()

    async def _serve_http2(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, verified: bool
    ) -> None:
        connection = Http2Connection(
            reader,
            writer,
            verified=verified,
            limits=self.limits,
            reply_later=self._replier.later,
            reply_now=self._replier.now,
            on_refused=self.on_refused,
        )
        self._http2[writer] = connection
        await connection.serve()

    async def _exchange(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, verified: bool
    ) -> bool:
        """Serve one request; whether to keep the connection for another. A connection without
        a client certificate gets one GET, within the read timeout, and no body is read."""
        limits = self.limits
        idle = limits.idle_timeout if verified else limits.read_timeout
        try:
            first = await asyncio.wait_for(reader.readline(), idle)
        except ValueError:  # a request line over the stream's limit
            self.on_refused("malformed")
            await self._send(writer, (414, b"request line too long\n", TEXT), close=True)
            return False
        if not first:
            return False
        try:
            async with asyncio.timeout(limits.read_timeout):
                head = await read_head(first, reader)
                if not verified and (head.method != "GET" or _has_body(head)):
                    self.on_refused("no-client-certificate")
                    refusal = PROBES_ONLY if self.probes_only else NO_CERTIFICATE
                    await self._send(writer, (403, refusal, TEXT), close=True)
                    return False
                body = await read_body(
                    head, reader, max_body=limits.max_body, go_on=lambda: _continue(writer)
                )
        except HttpError as err:
            self.on_refused("malformed")
            await self._send(writer, (err.status, message(str(err)), TEXT), close=True)
            return False
        except TimeoutError:
            self.on_refused("timeout")
            await self._send(writer, (408, b"request not received in time\n", TEXT), close=True)
            return False
        reply = await self._replier.reply(head.method, head.path, body)
        await self._send(writer, reply, close=head.close or not verified)
        return verified and not head.close

    async def _send(self, writer: asyncio.StreamWriter, reply: Reply, *, close: bool) -> None:
        status, body, content_type = reply
        lines = [
            f"HTTP/1.1 {status} {_PHRASES.get(status, '')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        async with asyncio.timeout(self.limits.read_timeout):  # a client that never reads
            await writer.drain()


_PHRASES = {s.value: s.phrase for s in HTTPStatus}


def _alpn(writer: asyncio.StreamWriter) -> str | None:
    """The protocol the TLS client chose (None over plain TCP or without ALPN)."""
    tls = writer.get_extra_info("ssl_object")
    return tls.selected_alpn_protocol() if tls is not None else None


def _has_body(head: Head) -> bool:
    return "transfer-encoding" in head.fields or head.fields.get("content-length", "0") != "0"


async def _continue(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    await writer.drain()


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Failed TLS handshakes and dropped clients are the clients' business: debug level."""
    error = context.get("exception")
    if isinstance(error, ssl.SSLError | ConnectionError | TimeoutError):
        log.debug("connection failed: %s", error)
    else:
        loop.default_exception_handler(context)
