"""The view as last read: a loop re-reads the cluster every few seconds and keeps the newest
`View`, when it was read, and the last read's error. A failed read keeps the last good view
and marks it stale; the loop never stops on an error (the page says what failed).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from vgpu.api.resources import ResourceNames
from vgpu.core.errors import VgpuError
from vgpu.inspect.lease import DEFAULT_LEASE, parse_time
from vgpu.inspect.real_use import RealUse
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.web.sharechart import SAMPLES_KEPT, Sample
from vgpu.inspect.web.view import View, build_view
from vgpu.inspect.web.where import DEFAULT_POLICIES, Parses, Policies

Read = Callable[[], tuple[Snapshot, str | None]]
"""Reads the cluster: its snapshot and the queue ConfigMap's queues.json (None: none)."""

STALE_AFTER = 3
"""Refresh intervals without a good read after which the page says the data is stale."""

REAL_USE_EVERY_S = 30.0
"""Real use is asked of Prometheus at most this often: the agents are scraped every 30 s, so
asking at each refresh would only repeat the same figures (four queries each time)."""


class Refresher:
    def __init__(
        self,
        read: Read,
        names: ResourceNames,
        interval_s: float,
        *,
        lease: str = DEFAULT_LEASE,
        live: bool = True,
        clock: Callable[[], float] = time.time,
        real_use: Callable[[], RealUse] | None = None,
        policies: Policies = DEFAULT_POLICIES,
    ) -> None:
        """`real_use`: reads the GPUs' real use (`--prometheus`); it reports its own failure
        in the `RealUse` it returns, as the text report does. `policies`: the extender's
        (`--policy`, `--allow-pod-policy`), for "where it could go"."""
        self._read, self._names, self._lease, self._live = read, names, lease, live
        self._ask_real_use, self._policies = real_use, policies
        self._real_use: RealUse | None = None
        self._real_use_at: float | None = None
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._parses = Parses(names)  # kept across reads: only changed objects are parsed
        self._view = build_view(Snapshot((), (), (), ""), None, names)
        self._read_at: float | None = None
        self._error = ""
        self._generation = 0
        self._samples: deque[Sample] = deque(maxlen=SAMPLES_KEPT)

    def refresh(self) -> None:
        """Read the cluster once; a failure is kept as the status's error, never raised."""
        try:
            snapshot, config = self._read()
            now = parse_time(snapshot.taken_at)
            if self._live:  # the "snapshot taken at" header is for saved files only
                snapshot = dataclasses.replace(snapshot, taken_at="")
            view = build_view(
                snapshot, config, self._names, now=now, lease=self._lease,
                real_use=self._fresh_real_use(), parses=self._parses, policies=self._policies,
            )  # fmt: skip
        except (VgpuError, OSError, ValueError) as e:  # the report's own errors, one line each
            self._failed(str(e) or type(e).__name__)
            return
        except Exception as e:  # a client library's surprise must not end the loop
            self._failed(f"{type(e).__name__}: {e}")
            return
        with self._lock:
            if _content(view) != _content(self._view) or self._read_at is None:
                self._generation += 1
            self._view, self._read_at, self._error = view, self._clock(), ""
            if view.queues.queues:
                shares = {q.name: float(q.share) for q in view.queues.queues}
                self._samples.append((self._read_at, shares))

    def _fresh_real_use(self) -> RealUse | None:
        """The last real use read, asked again once `REAL_USE_EVERY_S` has passed."""
        if self._ask_real_use is None:
            return None
        now = self._clock()
        if self._real_use_at is None or now - self._real_use_at >= REAL_USE_EVERY_S:
            self._real_use, self._real_use_at = self._ask_real_use(), now
        return self._real_use

    def _failed(self, error: str) -> None:
        with self._lock:
            self._error = error

    def current(self) -> tuple[View, dict[str, Any]]:
        """The newest view and its status (the `status` of `/api/status.json`)."""
        with self._lock:
            view, read_at, error, generation = (
                self._view, self._read_at, self._error, self._generation
            )  # fmt: skip
        age = None if read_at is None else max(0.0, self._clock() - read_at)
        extender = view.report.extender
        return view, {
            "generation": generation,
            "readAt": _iso(read_at),
            "takenAt": view.report.taken_at,  # a saved snapshot's own time ("" when live)
            "ageSeconds": None if age is None else round(age, 1),
            "stale": bool(error) or age is None or age > STALE_AFTER * self.interval_s,
            "error": error,
            "extender": extender.line() if extender is not None else "",
            "extenderUp": extender.up if extender is not None else None,
            "intervalSeconds": self.interval_s,
        }

    def samples(self) -> list[Sample]:
        """Each queue's share at each good read, oldest first (`sharechart`)."""
        with self._lock:
            return list(self._samples)

    def run(self) -> None:
        """Re-read every `interval_s` until `stop`."""
        while not self._stop.wait(self.interval_s):
            self.refresh()

    def stop(self) -> None:
        self._stop.set()


def _content(view: View) -> object:
    """What a page shows, less the extender's Lease age (which changes on every read): a new
    generation means the pages changed."""
    return (dataclasses.replace(view.report, extender=None), view.queues, view.queue_of_pod)


def _iso(at: float | None) -> str:
    if at is None:
        return ""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
