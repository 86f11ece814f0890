"""What one HTTP/2 connection may cost the extender, and the token buckets that count it.

HTTP/2 lets a client make the server work without asking it anything: every PING and SETTINGS
frame obliges a reply, a stream opened and reset at once ("rapid reset", CVE-2023-44487) queues a
verb that nobody will read, and a client that never opens its flow-control window leaves replies
in the server's memory. A well-behaved kube-scheduler does none of this at any rate that matters:
it opens one stream per call (a few per pod), resets streams only after their reply is out
(or when a call times out), returns flow-control credit for what it read, pings rarely (Go's
transport: only with ReadIdleTimeout set) and acknowledges settings once. So each
connection has a budget per kind, refilled at a steady rate; a client that spends one is sent
GOAWAY (ENHANCE_YOUR_CALM) and its connection closed (`vgpu.extender.server.http2`), as Go's and
nghttp2's servers do. The budgets hold for clients with the scheduler's certificate too: a stolen
certificate must not be a way to starve the filter.

Pure: the caller passes the clock's reading and the h2 events it parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from h2.events import (
    Event,
    PingReceived,
    PriorityUpdated,
    RemoteSettingsChanged,
    RequestReceived,
    StreamReset,
    UnknownFrameReceived,
    WindowUpdated,
)


@dataclass(frozen=True, slots=True)
class Rate:
    """At most `burst` at once, then `per_second` on average."""

    burst: int
    per_second: float


@dataclass(frozen=True, slots=True)
class Http2Caps:
    """Per-connection budgets; exceeding one ends the connection."""

    streams: Rate = Rate(4000, 2000.0)
    """New streams (requests). kube-scheduler needs up to three per pod (filter, prioritize,
    bind) and schedules a few hundred pods a second on a quiet host: 1,500/s must pass. The work
    they make is bounded by the 64 open streams and the verb workers; this bounds the parsing."""
    resets: Rate = Rate(100, 10.0)
    """Streams the client resets (RST_STREAM) while their request is read, queued or answered,
    and streams refused for being over the concurrent-stream limit once the client has
    acknowledged it; a reset of a stream whose reply is out is free (Go's client sends one
    after many calls), and so is a refusal before our SETTINGS were seen (Go's race)."""
    control: Rate = Rate(200, 20.0)
    """PING, SETTINGS, PRIORITY, unknown frames, and WINDOW_UPDATEs that are not due (none
    waits for the window and they return no credit owed, `Credit`): each costs a parse, PING
    and SETTINGS also a reply."""


@dataclass(slots=True)
class Bucket:
    """A token bucket: `take` spends one token, refilled continuously at the rate."""

    rate: Rate
    tokens: float = field(init=False)
    at: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.tokens = float(self.rate.burst)

    def take(self, now: float, n: int = 1) -> bool:
        """Spend `n` tokens at time `now`; False when the budget is spent (nothing is taken)."""
        elapsed = max(0.0, now - self.at)
        self.at = now
        self.tokens = min(float(self.rate.burst), self.tokens + elapsed * self.rate.per_second)
        if self.tokens < n:
            return False
        self.tokens -= n
        return True


@dataclass(slots=True)
class Budgets:
    """One connection's buckets."""

    streams: Bucket
    resets: Bucket
    control: Bucket

    @classmethod
    def of(cls, caps: Http2Caps, now: float) -> Budgets:
        """Full buckets at time `now`."""
        return cls(
            Bucket(caps.streams, at=now), Bucket(caps.resets, at=now), Bucket(caps.control, at=now)
        )


CREDIT_MIN = 1024
"""The least a connection WINDOW_UPDATE returns to be due (`Credit.returned`)."""


@dataclass(slots=True)
class Credit:
    """Flow-control credit a client owes back: bytes of DATA sent on the connection not yet
    returned in a connection WINDOW_UPDATE. Go's transport returns every 4 KiB of reply it
    reads (x/net http2 flow.go `inflow.add`, `inflowMinRefresh`, called from transport.go
    `transportResponseBody.Read`), long after the reply went out; charged to the control
    budget, those updates cut a kube-scheduler scheduling at full speed. An update is due when
    it returns at most what is owed and at least `CREDIT_MIN` of it (or all, when less is
    owed): the free updates are then at most one per `CREDIT_MIN` bytes we chose to send, plus
    one per reply, and returning credit a byte at a time is still a flood."""

    owed: int = 0

    def sent(self, n: int) -> None:
        """`n` more bytes of DATA went out."""
        self.owed += n

    def returned(self, delta: int) -> bool:
        """Take a connection WINDOW_UPDATE of `delta`; whether it was due."""
        owed = self.owed
        self.owed = max(0, owed - delta)
        return min(owed, CREDIT_MIN) <= delta <= owed


CONTROL = PingReceived | RemoteSettingsChanged | PriorityUpdated | UnknownFrameReceived
"""Frames that cost a parse, and PING and SETTINGS a reply, without asking anything."""


def charge(
    budgets: Budgets,
    credit: Credit,
    event: Event,
    now: float,
    *,
    ours: bool,
    waiting: Callable[[], bool],
) -> str | None:
    """Charge one h2 event to a connection's budgets; the name of the budget it overdraws.

    Charged is what costs work and what floods are made of, not what a well-behaved client does
    as a matter of course: a reset of a stream no longer `ours` (being read, queued or answered)
    cancels nothing (Go's transport resets with CANCEL every stream whose body kube-scheduler
    closes before its read loop saw END_STREAM: x/net http2 transport.go
    `transportResponseBody.Close` -> `cleanupWriteRequest`), and a WINDOW_UPDATE is due, not a
    flood, while a reply waits for the window (`waiting`) or when it returns credit for DATA we
    sent (`Credit`)."""
    if isinstance(event, RequestReceived):
        return None if budgets.streams.take(now) else "streams"
    if isinstance(event, StreamReset) and ours:
        return None if budgets.resets.take(now) else "resets"
    if isinstance(event, CONTROL):
        return None if budgets.control.take(now) else "control"
    if isinstance(event, WindowUpdated) and not _due(event, credit, waiting):
        return None if budgets.control.take(now) else "control"
    return None


def _due(event: WindowUpdated, credit: Credit, waiting: Callable[[], bool]) -> bool:
    if event.stream_id:  # h2 reports only open streams: one of ours still sending
        return waiting()
    return credit.returned(event.delta or 0) or waiting()
