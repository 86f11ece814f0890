"""Running a daemon until SIGTERM or SIGINT: the one place the node daemons handle signals."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

log = logging.getLogger(__name__)


def run_until_signal(
    start: Callable[[], None], stop: Callable[[], None], stopping: threading.Event
) -> None:
    """start(), wait until a signal (or anything else) sets `stopping`, then stop(). Main thread
    only; the previous handlers are restored afterwards."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stopping.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        start()
        stopping.wait()
    finally:
        stop()
        for sig, old in previous.items():
            signal.signal(sig, old)
