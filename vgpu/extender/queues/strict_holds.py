"""Strict holds handed from one extender leader to the next, on the leader Lease.

A strict queue whose head does not fit holds the other queues back for at most its
`strictSeconds` (`vgpu.core.queues.release`). The hold's start lived in the leader's memory, so a
failover started every running hold again and the other queues could be held back for longer
than the operator allowed. The leader now carries the starts on its Lease
(`LeaderElector.carry`, written with each renewal, every `retry_period`) and a new leader reads
them from the record it took over: a hold ends on time across a failover, give or take one
renewal (a hold started in the last `retry_period` before a leader died starts again). The
cooldown after a spent hold (`vgpu.io/strict-spent`) is carried the same way, so a failover
does not let a queue whose hold was spent hold again at once.

The annotation is JSON, queue name to the hold's start in wall-clock seconds. vgpu's service
account writes the Lease, but whoever else may update Leases in its namespace (a scheduler's
Role may) can write it too, so it is read through the one bounded decoder (`vgpu.api.decode`):
a value that cannot be read (too long, too deeply nested, not an object) is logged and dropped
(holds start again: the same as before this hand-off existed), never an exception that would
fail every release pass of every later leader; and a start in the future is taken as now, so no
value can make a hold outlast its `strictSeconds` from when this leader read it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from typing import Protocol

from vgpu.api.decode import MAX_HOLDS_CHARS, DecodeError, guard, load_json

log = logging.getLogger(__name__)

HOLDS_ANNOTATION = "vgpu.io/strict-holds"
SPENT_ANNOTATION = "vgpu.io/strict-spent"
"""The strict queues cooling down after a spent hold (queue to when the hold stopped holding
the others back, `release.Pass.spent`): a new leader must not let such a queue hold again
before its cooldown is over. The same format and decoder as the holds; a Lease written before
this annotation existed has none, read as no queue cooling down (as before)."""
RECLAIMED_ANNOTATION = "vgpu.io/reclaimed-for"
"""The jobs reclaim evicted for (job key to when), tried first by the next leader as by this
one (`vgpu.extender.queues.release_loop`); the same format and decoder as the holds."""


class LeaseNotes(Protocol):
    """What the hand-off needs of the leader elector (`vgpu.adapters.leader.LeaderElector`)."""

    def annotation(self, key: str) -> str | None: ...
    def carry(self, key: str, value: str | None) -> None: ...


def encode(held_since: Mapping[str, float]) -> str | None:
    """The annotation's value for these holds (None: no hold, the annotation is removed)."""
    if not held_since:
        return None
    return json.dumps({q: round(t, 3) for q, t in sorted(held_since.items())})


def decode(text: str | None, *, now: float) -> dict[str, float]:
    """The holds an annotation carries; {} (logged) when it cannot be read (module doc)."""
    return decode_times(text, HOLDS_ANNOTATION, now=now, dropped="strict holds start again")


def decode_spent(text: str | None, *, now: float) -> dict[str, float]:
    """The cooldowns an annotation carries; {} (logged) when it cannot be read. A time in the
    future is taken as now, so no value makes a cooldown outlast `strictSeconds` from when this
    leader read it."""
    return decode_times(text, SPENT_ANNOTATION, now=now, dropped="no strict queue cools down")


def decode_times(text: str | None, key: str, *, now: float, dropped: str) -> dict[str, float]:
    """Name to wall-clock time, as `encode` writes it, from annotation `key` through the bounded
    decoder; {} (logged, saying what is `dropped`) when it cannot be read; a name without a
    finite time is dropped; a time in the future is taken as now (module doc)."""
    if not text:
        return {}
    try:
        with guard(key):
            return _times(load_json(text, key, MAX_HOLDS_CHARS), key, now)
    except DecodeError as err:
        log.warning("lease annotation %s; %s", err, dropped)
        return {}


def _times(raw: object, key: str, now: float) -> dict[str, float]:
    """Name to time; a name without a finite time is dropped (logged)."""
    if not isinstance(raw, dict):
        raise DecodeError(f"{key}: not a JSON object")
    times: dict[str, float] = {}
    for name, since in raw.items():
        if isinstance(since, int | float) and not isinstance(since, bool) and math.isfinite(since):
            times[str(name)] = min(float(since), now)
        else:
            log.warning("lease annotation %s: %s has no time; dropped", key, name)
    return times
