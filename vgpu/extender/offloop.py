"""Verbs answered on the serving loop's thread must never block it.

Filter and prioritize are answered on the HTTP loop's own thread (`vgpu.extender.server.http1`,
`INLINE_VERBS`): every connection, probes included, waits while they run. A verb that finds it
would have to wait (a filter for a pod the watch does not show yet waits for the watch,
`vgpu.extender.watchwait`) raises `LeaveLoop` there instead, and the server answers the same
request again on a worker thread, where waiting costs one bounded verb thread and nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class LeaveLoop(Exception):
    """Raised by a verb on the loop's thread that would have to wait: answer it on a worker."""


class _Here(threading.local):
    on_loop = False


_here = _Here()


@contextmanager
def on_loop() -> Iterator[None]:
    """Mark the calls inside as made on the serving loop's thread (they must not block)."""
    _here.on_loop = True
    try:
        yield
    finally:
        _here.on_loop = False


def may_block() -> bool:
    """False inside `on_loop()`: a verb that would wait raises `LeaveLoop` instead."""
    return not _here.on_loop
