"""What one client may cost the extender's HTTP server, over HTTP/1.1 and HTTP/2 alike.

Its own module because both servers read it: `vgpu.extender.server.http1` (which hands each TLS
connection that chose "h2" to `vgpu.extender.server.http2`) and the HTTP/2 connection itself; held in
either of the two, the other would import it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vgpu.extender.server.http1_request import MAX_BODY
from vgpu.extender.server.http2_budgets import Http2Caps


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one client may cost the server."""

    read_timeout: float = 10.0
    """Seconds from a request's first byte to its last (and for the TLS handshake)."""
    idle_timeout: float = 120.0
    """Seconds a kept-alive connection may wait for its next request."""
    workers: int = 16
    """Threads running verbs."""
    max_connections: int = 4096
    max_unverified: int = 64
    """Connections without a client certificate (probes, scrapers) open at once; they may only
    GET, one request each, so they can neither fill `max_connections` nor send a body."""
    max_body: int = MAX_BODY
    max_buffered: int = MAX_BODY
    """Bytes one HTTP/2 connection may hold: request bodies being read, and replies waiting for
    the client's flow-control window or for the socket; past it the connection is closed."""
    http2: Http2Caps = field(default_factory=Http2Caps)
