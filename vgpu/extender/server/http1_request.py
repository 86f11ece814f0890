"""Reading one HTTP/1.1 request from a stream, with every size bounded.

kube-scheduler (Go's net/http) sends `POST <prefix>/<verb>` with a Content-Length; other
clients may send a chunked body, which is read here, or no length at all, which is refused with
411. What nobody well-behaved sends is refused with the status that says why: 400 (malformed),
413 (body too large), 431 (too many or too long header fields), 505 (not HTTP/1.x). Both a
Content-Length and a Transfer-Encoding, or two different lengths, are refused (request
smuggling through a proxy relies on such ambiguity).

The caller bounds the time: `read_request` is awaited under the server's read timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

MAX_BODY = 64 * 1024 * 1024
TEXT = "text/plain"
Reply = tuple[int, bytes, str]
"""(status, body, content type), over HTTP/1.1 or HTTP/2."""
NO_CERTIFICATE = b"a client certificate from the extender's client CA is required\n"
MAX_HEADERS = 100
MAX_LINE = 65536
_HEX = frozenset(b"0123456789abcdefABCDEF")


class HttpError(Exception):
    """A request that gets an error status; the connection is closed after the reply."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Head:
    """A request line and its header fields (lower-case names)."""

    method: str
    path: str
    version: str
    fields: dict[str, str]

    @property
    def close(self) -> bool:
        """Whether the client asked to close the connection after the reply."""
        token = self.fields.get("connection", "").lower()
        return token == "close" or (self.version == "HTTP/1.0" and token != "keep-alive")


def parse_head(request_line: bytes, lines: list[bytes]) -> Head:
    """The request line and header lines (without the blank line); raises `HttpError`."""
    words = str(request_line, "iso-8859-1").rstrip("\r\n").split()
    if len(words) != 3:
        raise HttpError(400, "bad request line")
    method, path, version = words
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505, f"HTTP version {version[:20]!r} is not supported")
    fields: dict[str, str] = {}
    for line in lines:
        name, colon, value = str(line, "iso-8859-1").partition(":")
        name = name.strip().lower()
        if not colon or not name or name != name.split()[0]:
            raise HttpError(400, "bad header line")
        value = value.strip()
        if name in ("content-length", "transfer-encoding") and fields.get(name, value) != value:
            raise HttpError(400, f"{name} given twice with different values")
        fields[name] = value
    return Head(method, path, version, fields)


def body_length(head: Head, max_body: int = MAX_BODY) -> int | None:
    """The Content-Length to read, or None for a chunked body; raises `HttpError`."""
    encoding = head.fields.get("transfer-encoding")
    length = head.fields.get("content-length")
    if encoding is not None:
        if length is not None:
            raise HttpError(400, "both Content-Length and Transfer-Encoding")
        if encoding.lower() != "chunked":
            raise HttpError(411, f"Transfer-Encoding {encoding[:40]!r}: send Content-Length")
        return None
    if length is None:
        if head.method == "POST":
            raise HttpError(411, "Content-Length required")
        return 0
    if not (length.isascii() and length.isdigit()) or len(length) > 12:  # "²".isdigit()
        raise HttpError(400, "bad Content-Length")
    if int(length) > max_body:
        raise HttpError(413, f"body over {max_body} bytes")
    return int(length)


async def _line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise HttpError(431, "header line too long") from None
    except asyncio.IncompleteReadError as err:
        if err.partial:
            raise HttpError(400, "request ended inside a line") from None
        raise
    return line


async def read_head(first: bytes, reader: asyncio.StreamReader) -> Head:
    """The header lines after request line `first`."""
    lines: list[bytes] = []
    while True:
        line = await _line(reader)
        if line in (b"\r\n", b"\n"):
            return parse_head(first, lines)
        if len(lines) == MAX_HEADERS:
            raise HttpError(431, "too many header fields")
        lines.append(line)


async def read_body(
    head: Head,
    reader: asyncio.StreamReader,
    *,
    max_body: int = MAX_BODY,
    go_on: Callable[[], Awaitable[None]] | None = None,
) -> bytes:
    """The request body; `go_on` sends "100 Continue" when the client waits for it."""
    length = body_length(head, max_body)
    if go_on is not None and head.fields.get("expect", "").lower() == "100-continue":
        await go_on()
    if length is not None:
        return await reader.readexactly(length) if length else b""
    return await _chunked(reader, max_body)


async def _chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    body = bytearray()
    while True:
        size_text = (await _line(reader)).split(b";", 1)[0].strip()
        if not size_text or len(size_text) > 8 or not _HEX.issuperset(size_text):
            raise HttpError(400, "bad chunk size")
        size = int(size_text, 16)
        if size == 0:
            break
        if len(body) + size > max_body:
            raise HttpError(413, f"body over {max_body} bytes")
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise HttpError(400, "chunk not followed by CRLF")
    for _ in range(MAX_HEADERS):  # trailer fields, ignored
        if await _line(reader) in (b"\r\n", b"\n"):
            return bytes(body)
    raise HttpError(431, "too many trailer fields")
