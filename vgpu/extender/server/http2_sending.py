"""The sending half of an HTTP/2 connection (`vgpu.extender.server.http2` reads and answers): a
stream's reply goes out as the client's flow-control window allows, the rest on a task; all of
it within the read timeout; replies a client does not take, or a socket it does not read, past
`max_buffered` bytes end the connection. A stream's task is cancelled when the client resets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.exceptions import ProtocolError

from vgpu.extender.server.http1_request import Reply
from vgpu.extender.server.http2_budgets import Credit
from vgpu.extender.server.limits import HttpLimits

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Stream:
    method: str
    path: str
    deadline: float
    body: bytearray = field(default_factory=bytearray)
    complete: bool = False
    """The request arrived whole and is being answered."""
    window: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the client may have opened its window for this stream."""
    out: bytes = b""
    """The reply's body, of which `sent` bytes are out."""
    sent: int = 0
    reset: bool = False
    """Refused: reset once answered, so that a client still sending stops."""
    task: asyncio.Task[None] | None = None
    """The work answering it (a verb on a worker, or the reply's rest): cancelled when the
    client resets the stream, so that a reset stream queues nothing."""


class Http2Replies:
    """Sends the replies of an HTTP/2 connection; `Http2Connection` reads and answers."""

    _h2: H2Connection
    _writer: asyncio.StreamWriter
    _limits: HttpLimits
    _streams: dict[int, Stream]
    _tasks: set[asyncio.Task[None]]
    _verified: bool
    _done: bool
    _on_refused: Callable[[str], None]
    _credit: Credit
    """What the client owes back in connection WINDOW_UPDATEs (not a flood: `Http2Connection`)."""

    def goaway(self, error: ErrorCodes = ErrorCodes.NO_ERROR) -> None:
        """Tell the client no new stream will be served (the reading half's)."""
        raise NotImplementedError

    def _calm(self, reason: str) -> None:
        """End a connection over a budget (the reading half's)."""
        raise NotImplementedError

    def _reply(self, stream_id: int, stream: Stream, reply: Reply) -> None:
        """Headers and what the client's window allows of the body now, the rest on a task."""
        status, stream.out, content_type = reply
        if self._buffered() > self._limits.max_buffered:  # replies the client does not take
            self._calm("buffered")
            return
        headers = [
            (b":status", b"%d" % status),
            (b"content-type", content_type.encode()),
            (b"content-length", b"%d" % len(stream.out)),
        ]
        try:
            self._h2.send_headers(stream_id, headers, end_stream=not stream.out)
        except ProtocolError:  # the client reset the stream
            stream.out = b""
        if self._push(stream_id, stream):
            self._finish(stream_id, stream)
        else:
            stream.task = self._spawn(self._rest(stream_id, stream))

    def _buffered(self) -> int:
        """Bytes held for this connection's streams: bodies being read, replies not yet out."""
        return sum(len(s.body) + len(s.out) - s.sent for s in self._streams.values())

    def _push(self, stream_id: int, stream: Stream) -> bool:
        """Send what the window allows of the body; whether it is all out (or the stream gone)."""
        h2, out = self._h2, stream.out
        try:
            while stream.sent < len(out):
                size = min(h2.local_flow_control_window(stream_id), h2.max_outbound_frame_size)
                if size <= 0:
                    return False
                end = min(len(out), stream.sent + size)
                h2.send_data(stream_id, out[stream.sent : end], end_stream=end == len(out))
                self._credit.sent(end - stream.sent)
                stream.sent = end
        except ProtocolError:
            pass  # the client reset the stream
        return True

    async def _rest(self, stream_id: int, stream: Stream) -> None:
        """The rest of a reply, as the client's window opens: all of it within the read timeout
        (a client opening its window a byte at a time does not hold the reply longer)."""
        async with asyncio.timeout(self._limits.read_timeout):
            while True:
                stream.window.clear()
                await self._flush()
                await stream.window.wait()
                if self._push(stream_id, stream):
                    break
        self._finish(stream_id, stream)
        await self._flush()

    def _finish(self, stream_id: int, stream: Stream) -> None:
        self._streams.pop(stream_id, None)
        if stream.reset:
            with contextlib.suppress(ProtocolError):  # the client closed it meanwhile
                self._h2.reset_stream(stream_id)
        if not self._verified:
            self.goaway()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self._guarded(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: work.close())  # cancelled before it started
        return task

    async def _guarded(self, work: Coroutine[Any, Any, None]) -> None:
        """A stream's failure to write (client gone, never reading) ends the connection."""
        try:
            await work
        except (ConnectionError, ssl.SSLError, TimeoutError) as err:
            log.debug("HTTP/2 reply not sent: %s", err)
            self._writer.transport.abort()

    async def _flush(self) -> None:
        data = self._h2.data_to_send()
        if data and not self._writer.is_closing():
            held = self._writer.transport.get_write_buffer_size() + len(data)
            if held > self._limits.max_buffered:  # a client that does not read its socket
                self._on_refused("buffered")
                self._done = True
                self._writer.transport.abort()
                return
            self._writer.write(data)
            async with asyncio.timeout(self._limits.read_timeout):  # a client that never reads
                await self._writer.drain()
