"""HTTP/2 on the extender's TLS connections (ALPN "h2"), with the sans-IO `h2` library.

Why: kube-scheduler's extender client is Go's net/http with HTTP/2 configured
(pkg/scheduler/extender.go makeTransport -> apimachinery pkg/util/net/http.go
SetTransportDefaults). Over HTTP/1.1 it keeps at most 2 idle connections and resumes no TLS
session, so binds running beside the next pods' filters keep opening connections, each a full
TLS handshake inside the serial scheduling cycle. Over HTTP/2 it multiplexes every call as a
stream of one connection.

The rules are HTTP/1.1's (`vgpu.extender.server.http1`, which answers the requests): a stream's request
must arrive whole within `read_timeout` of its HEADERS (else 408) with a body of at most
`max_body` (else 413); a connection with no stream open for `idle_timeout` gets GOAWAY; at most
`MAX_STREAMS` streams are open at once (SETTINGS_MAX_CONCURRENT_STREAMS, which Go honours, so
in-flight verbs are bounded too). A client without a certificate gets one GET; anything else is
answered 403 and the connection closed. Streams are answered as they finish, each reply sent as
the client's flow-control window allows; received data is acknowledged as it is read, so large
uploads flow. A protocol error ends the connection (h2 queues the GOAWAY), counted "malformed".
Replies are sent by the connection's sending half, `vgpu.extender.server.http2_sending`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    RemoteSettingsChanged,
    RequestReceived,
    SettingsAcknowledged,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes, Settings

from vgpu.extender.server.http1_request import NO_CERTIFICATE, TEXT, Reply
from vgpu.extender.server.http2_budgets import Budgets, Credit, charge
from vgpu.extender.server.http2_sending import Http2Replies, Stream
from vgpu.extender.server.limits import HttpLimits

log = logging.getLogger(__name__)

MAX_STREAMS = 64
_H2_CEILING = 100
"""Open streams past which h2 ends the connection (PROTOCOL_ERROR): Go's streams before our
SETTINGS (`_over_limit`), the least RFC 9113 §6.5.2 recommends."""
WINDOW = 1 << 20
"""Receive window, per stream and for the connection: a 100 KB filter body (5,000 node names)
arrives without waiting on a WINDOW_UPDATE round trip."""
_READ_MIN = 512
_READ_MAX = 16384
"""Bytes handed to h2 at a time: `_READ_MIN` while the reads are dense with frames (and always
for a connection without a certificate), doubling up to `_READ_MAX` after each read of few
frames. h2 parses every frame of what it is handed before an event is checked against a
budget: 16 KiB of PINGs or of HEADERS+RST_STREAM is 960 to 1,900 frames, which held the loop,
and every filter behind it, for 25 ms unloaded and for hundreds of milliseconds on a busy core
(bench/extender_h2_attacks.py); 512 bytes is at most ~60 frames. kube-scheduler's frames are
few and large (HEADERS, then DATA of up to 16 KiB), so its reads grow to the maximum at once. After each read the connection yields the loop:
the TLS layer buffers all the socket holds, so reads from that buffer would otherwise parse a
whole flood in one turn of the loop."""
_LINGER_S = 0.25
_LINGER_BYTES = 1 << 20
"""What a connection ended over a budget may still send, dropped unparsed (`_drop_input`)."""
_FEW = 8
"""A full read of at most this many events lets the next read be twice as large."""
ReplyLater = Callable[[str, str, bytes], Awaitable[Reply]]
"""(method, path, body) -> the reply."""
ReplyNow = Callable[[str, str, bytes], Reply | None]
"""The reply if it is made on the loop's thread (`INLINE_VERBS`), else None."""


class Http2Connection(Http2Replies):
    """One HTTP/2 connection: `serve()` until the client leaves, idles, or breaks the protocol."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        verified: bool,
        limits: HttpLimits,
        reply_later: ReplyLater,
        reply_now: ReplyNow,
        on_refused: Callable[[str], None],
    ) -> None:
        self._reader, self._writer, self._verified = reader, writer, verified
        self._limits, self._reply_later, self._reply_now = limits, reply_later, reply_now
        self._on_refused = on_refused
        config = H2Configuration(
            client_side=False,
            header_encoding=None,
            validate_outbound_headers=False,  # our own three, lower-case and valid
            normalize_outbound_headers=False,
        )
        self._h2 = H2Connection(config)
        self._h2.local_settings = Settings(
            client=False,
            initial_values={
                SettingCodes.MAX_CONCURRENT_STREAMS: MAX_STREAMS,
                SettingCodes.INITIAL_WINDOW_SIZE: WINDOW,
            },
        )
        self._streams: dict[int, Stream] = {}
        self._credit = Credit()
        self._tasks: set[asyncio.Task[None]] = set()
        self._done = False
        now = asyncio.get_running_loop().time()
        self._budgets = Budgets.of(limits.http2, now)
        self._deadline = None if verified else now + limits.read_timeout
        """A connection without a certificate ends by then, whatever it sends (a PING every
        few seconds kept it open for good)."""
        self._asked = False
        """Whether it has made its one request."""
        self._acked = False
        """Whether the client has acknowledged our SETTINGS (`_over_limit`)."""
        self._chunk = _READ_MIN
        """Bytes of the next read (see `_READ_MIN`)."""
        self._receiving = False
        self._linger = False
        """Ended over a budget while reading: drop the client's input before closing."""

    async def serve(self) -> None:
        """Read and answer; connection errors reach the caller, which closes the socket."""
        self._h2.initiate_connection()  # announces MAX_STREAMS; `_over_limit` enforces it
        self._h2.local_settings = Settings(
            client=False,
            initial_values={
                SettingCodes.MAX_CONCURRENT_STREAMS: _H2_CEILING,
                SettingCodes.INITIAL_WINDOW_SIZE: WINDOW,
            },
        )
        self._h2.increment_flow_control_window(WINDOW - 65535)
        try:
            await self._flush()
            while not self._done:
                data = await self._read()
                if not data:
                    break
                self._receive(data)
                await self._flush()
                await asyncio.sleep(0)  # the next read may come from a buffer: let others run
            if self._linger:
                await self._drop_input()
        finally:
            for task in self._tasks:
                task.cancel()

    def goaway(self, error: ErrorCodes = ErrorCodes.NO_ERROR) -> None:
        """Tell the client no new stream will be served and stop reading (`serve` returns; the
        caller closes the socket)."""
        self._say_goaway(error)
        transport = self._writer.transport
        if not self._writer.is_closing() and isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()  # no data may follow the EOF fed
        self._reader.feed_eof()

    def _say_goaway(self, error: ErrorCodes) -> None:
        self._done = True
        with contextlib.suppress(ProtocolError):  # already closed
            self._h2.close_connection(error)
        if not self._writer.is_closing():
            self._writer.write(self._h2.data_to_send())

    async def _drop_input(self) -> None:
        """After a GOAWAY for a flood: read and drop what the client still sends, at most
        `_LINGER_BYTES` for `_LINGER_S`, unparsed, so that the socket closes with a FIN. Closed
        with unread data it sends a RST, which can destroy the GOAWAY before the client reads
        it (and with it the reason, ENHANCE_YOUR_CALM)."""
        dropped = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_LINGER_S):
                while dropped < _LINGER_BYTES:
                    data = await self._reader.read(65536)
                    if not data:
                        return
                    dropped += len(data)

    def abort(self) -> None:
        """Close the socket at once (the server is stopping)."""
        self._writer.transport.abort()

    # -- reading ---------------------------------------------------------------------------------
    async def _read(self) -> bytes:
        """The next bytes; b"" at EOF or after an idle timeout (GOAWAY sent)."""
        while True:
            try:
                async with asyncio.timeout(self._wait()):
                    return await self._reader.read(self._chunk)
            except TimeoutError:
                now = asyncio.get_running_loop().time()
                if self._deadline is not None and now >= self._deadline:
                    self._on_refused("timeout")
                    self.goaway()
                    return b""
                if not self._streams:
                    self.goaway()
                    return b""
                self._expire()
                await self._flush()

    def _wait(self) -> float:
        now = asyncio.get_running_loop().time()
        pending = [s.deadline for s in self._streams.values() if not s.complete]
        if self._deadline is not None:
            pending.append(self._deadline)
        if pending:
            return max(0.0, min(pending) - now)
        return self._limits.idle_timeout

    def _expire(self) -> None:
        now = asyncio.get_running_loop().time()
        for stream_id, stream in list(self._streams.items()):
            if not stream.complete and stream.deadline <= now:
                self._refuse(stream_id, "timeout", (408, b"request not received in time\n", TEXT))

    def _receive(self, data: bytes) -> None:
        self._receiving = True
        try:
            self._parse(data)
        finally:
            self._receiving = False

    def _parse(self, data: bytes) -> None:
        if self._done:  # read before a reply's task ended the connection
            return
        try:
            events = self._h2.receive_data(data)
        except ProtocolError as err:
            log.debug("HTTP/2 protocol error: %s", err)
            self._on_refused("malformed")
            self._done = True
            return
        few = self._verified and len(events) <= _FEW and len(data) >= self._chunk
        self._chunk = min(_READ_MAX, self._chunk * 2) if few else _READ_MIN
        for event in events:
            if self._done:  # GOAWAY sent (a client without a certificate was answered)
                break
            self._event(event)

    def _event(self, event: Event) -> None:
        spent = self._spent(event)
        if spent is not None:
            self._calm(f"flood-{spent}")
        elif isinstance(event, RequestReceived):
            self._request(event)
        elif isinstance(event, DataReceived):
            self._data(event)
        elif isinstance(event, StreamEnded) and event.stream_id in self._streams:
            self._complete(event.stream_id)
        elif isinstance(event, StreamReset):
            self._reset(event.stream_id or 0)
        elif isinstance(event, WindowUpdated | RemoteSettingsChanged):
            only = event.stream_id if isinstance(event, WindowUpdated) else 0
            for stream_id, stream in self._streams.items():
                if not only or only == stream_id:
                    stream.window.set()
        elif isinstance(event, ConnectionTerminated):
            self._done = True
        elif isinstance(event, SettingsAcknowledged):
            self._acked = True

    def _spent(self, event: Event) -> str | None:
        """Charge the event to the connection's budgets (`vgpu.extender.server.http2_budgets.charge`); the
        name of the one it overdraws."""
        now = asyncio.get_running_loop().time()
        stream_id = getattr(event, "stream_id", None) or 0
        return charge(
            self._budgets, self._credit, event, now,
            ours=stream_id in self._streams, waiting=self._waiting,
        )  # fmt: skip

    def _waiting(self) -> bool:
        """Whether a reply waits for the client's window (its WINDOW_UPDATEs are then due)."""
        return any(s.sent < len(s.out) for s in self._streams.values())

    def _calm(self, reason: str) -> None:
        """End a connection that spent a budget: GOAWAY ENHANCE_YOUR_CALM, and none of the
        replies h2 queued for the flood (PING and SETTINGS acknowledgements) go out."""
        if self._done:
            return
        log.warning(
            "HTTP/2 connection closed with GOAWAY ENHANCE_YOUR_CALM: %s (its budgets: %s)",
            reason,
            self._limits.http2,
        )
        self._on_refused(reason)
        self._h2.data_to_send()  # the flood's acknowledgements, dropped
        if self._receiving:  # `serve` ends after this read, dropping what follows
            self._say_goaway(ErrorCodes.ENHANCE_YOUR_CALM)
            self._linger = True
        else:
            self.goaway(ErrorCodes.ENHANCE_YOUR_CALM)

    def _reset(self, stream_id: int) -> None:
        """The client reset a stream: its work is cancelled (nothing stays queued for it); a
        client without a certificate has spent its one request."""
        stream = self._streams.pop(stream_id, None)
        if stream is not None:
            stream.window.set()
            if stream.task is not None:
                stream.task.cancel()
        if not self._verified:
            self.goaway()

    def _request(self, event: RequestReceived) -> None:
        stream_id = event.stream_id or 0
        fields = {_text(name): _text(value) for name, value in event.headers or []}
        method, path = fields.get(":method", ""), fields.get(":path", "/")
        if not self._verified and self._asked:  # one request per connection, as over HTTP/1.1
            with contextlib.suppress(ProtocolError):
                self._h2.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)
            return
        self._asked = True
        if len(self._streams) >= MAX_STREAMS:
            self._over_limit(stream_id)
            return
        if not self._verified and (method != "GET" or event.stream_ended is None):
            self._refuse(stream_id, "no-client-certificate", (403, NO_CERTIFICATE, TEXT))
            return
        deadline = asyncio.get_running_loop().time() + self._limits.read_timeout
        self._streams[stream_id] = Stream(method, path, deadline)

    def _over_limit(self, stream_id: int) -> None:
        """Refuse a stream over `MAX_STREAMS` with REFUSED_STREAM, which Go's client retries
        (RFC 9113 §5.1.2, §8.7; x/net http2 transport.go `canRetryError`). Go opens up to
        `initialMaxConcurrentStreams` (100) before it has processed our SETTINGS, so a
        kube-scheduler redialling with binds waiting does; h2 would end the whole connection.
        Charged to the resets budget only once the client has acknowledged our SETTINGS."""
        with contextlib.suppress(ProtocolError):
            self._h2.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)
        now = asyncio.get_running_loop().time()
        if self._acked and not self._budgets.resets.take(now):
            self._calm("flood-resets")

    def _data(self, event: DataReceived) -> None:
        stream_id, data = event.stream_id or 0, event.data or b""
        self._h2.acknowledge_received_data(event.flow_controlled_length or 0, stream_id)
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        if len(stream.body) + len(data) > self._limits.max_body:
            message = f"body over {self._limits.max_body} bytes\n".encode()
            self._refuse(stream_id, "malformed", (413, message, TEXT))
            return
        stream.body += data
        if self._buffered() > self._limits.max_buffered:
            self._calm("buffered")

    # -- replying --------------------------------------------------------------------------------
    def _complete(self, stream_id: int) -> None:
        """Answer a whole request: at once where `reply_now` can (filter and prioritize, so no
        task is made for them), else on a task."""
        stream = self._streams[stream_id]
        stream.complete = True
        body = bytes(stream.body)
        reply = self._reply_now(stream.method, stream.path, body)
        if reply is None:
            stream.task = self._spawn(self._replied_later(stream_id, stream, body))
        else:
            self._reply(stream_id, stream, reply)

    async def _replied_later(self, stream_id: int, stream: Stream, body: bytes) -> None:
        self._reply(stream_id, stream, await self._reply_later(stream.method, stream.path, body))
        await self._flush()

    def _refuse(self, stream_id: int, reason: str, reply: Reply) -> None:
        """Answer a request that will not be served, then reset its stream (a client still
        sending stops); without a certificate, also close the connection."""
        self._on_refused(reason)
        stream = self._streams.pop(stream_id, None) or Stream("", "", 0.0)
        stream.reset = True
        self._reply(stream_id, stream, reply)


def _text(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value
