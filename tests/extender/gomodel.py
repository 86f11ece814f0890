"""A model of how kube-scheduler's extender client talks HTTP/2: Go's golang.org/x/net/http2
Transport (as vendored in Kubernetes) under pkg/scheduler/extender.go `HTTPExtender.send`.
Written from their source, not from the extender's code; each rule names where it comes from.

* Connection start (transport.go `newClientConn`): SETTINGS (ENABLE_PUSH 0, INITIAL_WINDOW_SIZE
  `transportDefaultStreamFlow` = 4 MiB, MAX_HEADER_LIST_SIZE), then a connection WINDOW_UPDATE
  of `transportDefaultConnFlow` (1 GiB). Until the server's SETTINGS arrive it may open up to
  `initialMaxConcurrentStreams` (100) streams.
* Flow control (flow.go `inflow.add`, called from transport.go `transportResponseBody.Read` for
  the connection and the stream): bytes read are returned to the server in WINDOW_UPDATEs once
  at least `inflowMinRefresh` (4 KiB) have accumulated: one connection WINDOW_UPDATE per 4 KiB of
  reply bodies read, whatever the stream, and a stream WINDOW_UPDATE per 4 KiB of that stream.
* Closing (extender.go `send`: `defer resp.Body.Close()` after `json.NewDecoder(resp.Body)
  .Decode`; transport.go `transportResponseBody.Close` -> `abortStream` -> `cleanupWriteRequest`
  -> `writeStreamReset(ErrCodeCancel)`): the decoder stops at the end of the JSON value, so the
  body is closed as soon as its last byte is read; if the read loop has not processed the
  END_STREAM yet (`cs.peerClosed`), the stream is reset with CANCEL. The model takes the worst
  case: every stream is reset after its body is read.
* REFUSED_STREAM: the request is retried, the first time at once (transport.go `RoundTrip`,
  `shouldRetryRequest`, `canRetryError`); the caller does it here (`refused`).
* PING only after `ReadIdleTimeout` (30 s in apimachinery's defaults) without a frame read: none
  on a busy connection.
"""

from __future__ import annotations

import ssl

from h2.errors import ErrorCodes
from h2.events import DataReceived, ResponseReceived, StreamEnded, StreamReset
from hyperframe.frame import RstStreamFrame, WindowUpdateFrame

from tests.extender.h2client import H2Client, Response

STREAM_FLOW = 4 << 20
CONN_FLOW = 1 << 30
MIN_REFRESH = 4 << 10


class GoClient(H2Client):
    """`H2Client` speaking as Go's transport does (see the module's docstring)."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        super().__init__(sock, window=STREAM_FLOW)  # Go's SETTINGS: INITIAL_WINDOW_SIZE 4 MiB
        self.h2.increment_flow_control_window(CONN_FLOW)
        self.flush()
        self.conn_unsent = 0
        self.stream_unsent: dict[int, int] = {}
        self.resets_sent = 0
        self.refused: set[int] = set()
        """Streams the server refused: Go retries their requests at once (transport.go
        `RoundTrip`, `shouldRetryRequest`: REFUSED_STREAM is `canRetryError`)."""

    def _event(self, event: object) -> None:
        if isinstance(event, StreamReset) and event.error_code == ErrorCodes.REFUSED_STREAM:
            self.refused.add(event.stream_id or 0)
            super()._event(event)
        elif isinstance(event, ResponseReceived | StreamEnded | StreamReset):
            super()._event(event)
        elif isinstance(event, DataReceived):
            stream_id = event.stream_id or 0
            response = self.responses[stream_id]
            response.body += event.data or b""
            self._returned(stream_id, event.flow_controlled_length or 0)
            if _whole(response):
                self._close_body(stream_id)
        else:
            super()._event(event)

    def _returned(self, stream_id: int, n: int) -> None:
        """`inflow.add`: a WINDOW_UPDATE once 4 KiB are unsent, connection and stream."""
        self.conn_unsent += n
        if self.conn_unsent >= MIN_REFRESH:
            self._raw(_window_update(0, self.conn_unsent))
            self.conn_unsent = 0
        unsent = self.stream_unsent.get(stream_id, 0) + n
        self.stream_unsent[stream_id] = unsent
        if unsent >= MIN_REFRESH:
            self._raw(_window_update(stream_id, unsent))
            self.stream_unsent[stream_id] = 0

    def _close_body(self, stream_id: int) -> None:
        """`Body.Close` once the JSON value is read, before END_STREAM is processed."""
        frame = RstStreamFrame(stream_id)
        frame.error_code = ErrorCodes.CANCEL
        self._raw(frame.serialize())
        self.resets_sent += 1

    def _raw(self, data: bytes) -> None:
        """Frames written past h2's state machine, as Go's framer writes them."""
        self.flush()
        self.sock.sendall(data)


def _whole(response: Response) -> bool:
    length = response.headers.get(b"content-length")
    return length is not None and len(response.body) >= int(length)


def _window_update(stream_id: int, increment: int) -> bytes:
    frame = WindowUpdateFrame(stream_id)
    frame.window_increment = increment
    return frame.serialize()
