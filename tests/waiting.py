"""The tests' one poll-until loop: wait for a condition that another thread or process makes true.

`wait_until` fails the test naming what it waited for; `holds_within` answers yes or no, for
the tests that check something does *not* happen in a while (`assert not holds_within(...)`).
Both check once more at the deadline, so a slow machine that makes the condition true just as
time runs out does not fail the test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

INTERVAL = 0.01
"""Seconds between checks: short next to every timeout the tests use, long next to a check."""


def poll(check: Callable[[], Any], timeout: float, interval: float = INTERVAL) -> Any:
    """The first truthy value of `check` within `timeout` seconds, else its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    return check()


def wait_until(
    check: Callable[[], Any],
    timeout: float = 5.0,
    what: str = "the condition",
    *,
    interval: float = INTERVAL,
) -> Any:
    """`check`'s first truthy value; an `AssertionError` naming `what` after `timeout` seconds."""
    value = poll(check, timeout, interval)
    if not value:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
    return value


def holds_within(
    check: Callable[[], Any], timeout: float = 5.0, *, interval: float = INTERVAL
) -> bool:
    """Whether `check` is true at some point within `timeout` seconds."""
    return bool(poll(check, timeout, interval))
