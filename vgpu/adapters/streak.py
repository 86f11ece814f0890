"""Saying a lasting failure once: the daemons retry every second or so, the log should not.

A loop that retries something (patching the node, reading the kubelet's pod-resources API) keeps
a `Streak`: the first failure is a WARNING, the repeats while it lasts are DEBUG (`-v` shows
them), and the first success after it is one INFO line, so an operator reading the log at the
default level sees when a problem began and when it ended.
"""

from __future__ import annotations

import logging


class Streak:
    """The failure state of one retried action, named by `what` in every line."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log, self._what = log, what
        self._failures = 0

    def failed(self, error: object) -> None:
        level = logging.DEBUG if self._failures else logging.WARNING
        self._failures += 1
        self._log.log(level, "%s (will retry): %s", self._what, error)

    def succeeded(self) -> None:
        if self._failures:
            self._log.info("%s: works again after %d failure(s)", self._what, self._failures)
            self._failures = 0
