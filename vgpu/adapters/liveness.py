"""Whether a daemon's background loops are alive: a loop that ended or stopped beating turns a
probe red, so the kubelet restarts the daemon (or the Service stops routing to it) instead of
the daemon serving on from a state no loop keeps any more (the node agent's maintenance loop
once died on one exception while `/healthz` stayed 200).

Each loop is registered with its thread and the longest it may go between beats; it beats once
per turn (`beat`). `run_duty` runs one duty of a loop so that any exception is logged and counted,
never the end of the loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Loop:
    thread: threading.Thread | None
    stale_s: float
    beat_at: float


class Liveness:
    """The daemon's loops, their threads and last beats. Thread-safe enough: a beat is one
    assignment, a probe reads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._loops: dict[str, _Loop] = {}
        self.failures: dict[str, int] = {}
        """Exceptions caught per duty (`run_duty`), for logs and tests."""

    def register(self, name: str, thread: threading.Thread | None, stale_s: float) -> None:
        """Watch `thread` (None: beats only), which must beat at least every `stale_s` seconds."""
        self._loops[name] = _Loop(thread, stale_s, self._clock())

    def beat(self, name: str) -> None:
        """The loop `name` has turned once."""
        loop = self._loops.get(name)
        if loop is not None:
            loop.beat_at = self._clock()

    def why_not_live(self) -> str | None:
        """None while every loop runs and beats; else which one ended or is stuck."""
        now = self._clock()
        for name, loop in list(self._loops.items()):
            if loop.thread is not None and not loop.thread.is_alive():
                return f"the {name} loop has ended"
            if now - loop.beat_at > loop.stale_s:
                return f"the {name} loop has not turned for {now - loop.beat_at:.0f}s"
        return None

    def run_duty(self, name: str, duty: Callable[[], bool]) -> bool:
        """Run one duty; an exception is logged, counted and answered as a failure (False), so
        the loop backs off and retries it like a failed API call."""
        try:
            return duty()
        except Exception:  # one duty's bug or one bad object must not end the loop
            self.failures[name] = self.failures.get(name, 0) + 1
            log.exception("%s failed; retrying after a backoff", name)
            return False


def done(step: Callable[[], object]) -> Callable[[], bool]:
    """A duty without a verdict (for `run_duty`): done when it returns."""

    def run() -> bool:
        step()
        return True

    return run
