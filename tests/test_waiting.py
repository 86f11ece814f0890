"""The tests' poll-until loop (`tests/waiting.py`): it returns as soon as the condition holds,
fails naming what it waited for, and checks once more at the deadline."""

from __future__ import annotations

import threading
import time

import pytest

from tests.waiting import holds_within, wait_until


def test_returns_the_first_truthy_value_made_by_another_thread() -> None:
    box: list[int] = []
    threading.Timer(0.05, lambda: box.append(7)).start()
    started = time.monotonic()
    assert wait_until(lambda: box and box[0], timeout=5.0) == 7
    assert time.monotonic() - started < 2.0


def test_times_out_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match="waiting for the pod to bind"):
        wait_until(lambda: False, timeout=0.05, what="the pod to bind")


def test_holds_within_says_no_when_the_condition_never_holds() -> None:
    assert not holds_within(lambda: None, timeout=0.05)
    assert holds_within(lambda: 1, timeout=0.05)


def test_checks_once_more_at_the_deadline() -> None:
    calls: list[None] = []

    def late() -> bool:
        calls.append(None)
        return len(calls) > 1

    assert wait_until(late, timeout=0.01, interval=0.05) and len(calls) == 2
