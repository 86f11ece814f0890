"""Capped, jittered exponential backoff for the daemons' retries against the API server.

A failing API server (403 without RBAC, 500 during an upgrade) must not be hammered: the first
retry waits `base` seconds, each further one twice as long up to `cap`, and every delay is
jittered down to half so that the agents of a large cluster do not retry in step. A success
starts over from `base`.
"""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    def __init__(
        self, base: float, cap: float, *, rng: Callable[[], float] = random.random
    ) -> None:
        if base <= 0 or cap < base:
            raise ValueError(f"backoff needs 0 < base <= cap, got base={base} cap={cap}")
        self.base, self.cap = base, cap
        self._rng = rng
        self.failures = 0

    def next_delay(self) -> float:
        """The wait before the next attempt, after one more failure."""
        ceiling = min(self.cap, self.base * 2.0 ** min(self.failures, 32))
        self.failures += 1
        return ceiling * (0.5 + self._rng() / 2)

    def reset(self) -> None:
        self.failures = 0
