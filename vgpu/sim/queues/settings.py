"""What a queued replay runs: the queues, when each starts, the load, and the flags' parsing.

`vgpu simulate --queues A=1,B=3 --queue-start B=2h --strict B=10m --reclaim ...` becomes one
`QueueSetup`. Every malformed flag is refused with `InvalidRequest` naming the flag and the fix,
which the command line prints as one line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from vgpu.core.errors import ConfigError, InvalidRequest
from vgpu.core.queues.proportion import QueueSpec

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", re.IGNORECASE)
MAX_SPAN_S = 7 * 86400.0
"""The latest a queue may start and the longest --measure: the replay steps every `tick_s`, so a
start 100000 days out was a replay that never ended."""


@dataclass(frozen=True, slots=True)
class QueueSetup:
    """One queued replay's inputs (the figures' `inputs` in `--json`)."""

    specs: tuple[QueueSpec, ...]
    start_s: dict[str, float] = field(default_factory=dict)
    load: float = 1.5
    """Per queue: arrival rate x mean pod core-time, as a multiple of the cluster's cores."""
    fcfs: bool = False
    """One global arrival order and no queues (kube-scheduler without vgpu queues)."""
    large: str | None = None
    """The queue that gets every pod asking one whole GPU or more (the others share the rest)."""
    memory: str | None = None
    """The queue whose fractional pods ask `vgpu.io/memory` explicitly (`poisson`)."""
    measure_s: float = 4 * 3600.0
    """How long the replay runs after the last queue starts."""
    min_runtime_s: float = 300.0
    max_duration_s: float = 6 * 3600.0
    tick_s: float = 10.0
    window: int = 1000

    @property
    def names(self) -> tuple[str, ...]:
        """The queues' names, in flag order."""
        return tuple(s.name for s in self.specs)

    @property
    def last_start_s(self) -> float:
        """When the last queue starts sending pods."""
        return max((self.start_s.get(n, 0.0) for n in self.names), default=0.0)

    @property
    def end_s(self) -> float:
        """When the replay stops."""
        return self.last_start_s + self.measure_s


def parse_duration(flag: str, text: str) -> float:
    """Seconds from "90", "90s", "10m", "2h", "1.5h" or "1d"."""
    match = _DURATION.match(text)
    if match is None:
        raise InvalidRequest(flag, f"{text!r} is not a duration", 'use e.g. "90s", "10m" or "2h"')
    value = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not math.isfinite(value):  # 400 digits read as inf
        raise InvalidRequest(flag, f"{text[:20]}... is too long", 'use e.g. "90s", "10m" or "2h"')
    return value


def _pairs(flag: str, text: str, example: str) -> list[tuple[str, str]]:
    pairs = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InvalidRequest(flag, f"{part.strip()!r} is not NAME=VALUE", f"use e.g. {example}")
        pairs.append((name.strip(), value.strip()))
    return pairs


def parse_queues(text: str) -> list[tuple[str, int]]:
    """`--queues A=1,B=3`: names (DNS labels) with whole weights >= 1, each named once."""
    out: list[tuple[str, int]] = []
    for name, value in _pairs("--queues", text, '"A=1,B=3"'):
        if not _NAME.match(name) or len(name) > 63:
            raise InvalidRequest("--queues", f"{name!r} is not a queue name", "use a-z, 0-9, -")
        if not value.isdigit() or int(value) < 1:
            raise InvalidRequest(
                "--queues", f"weight {value!r} of {name}", "use a whole number >= 1"
            )
        if any(name == n for n, _ in out):
            raise InvalidRequest("--queues", f"{name} is named twice", "name each queue once")
        out.append((name, int(value)))
    if len(out) < 1:
        raise InvalidRequest("--queues", "no queues given", 'use e.g. "A=1,B=3"')
    return out


def per_queue_durations(flag: str, values: list[str], names: tuple[str, ...]) -> dict[str, float]:
    """`--queue-start B=2h` or `--strict B=10m` (repeatable, or comma-joined), per known queue."""
    out: dict[str, float] = {}
    for text in values:
        for name, value in _pairs(flag, text, f'"{names[-1]}=10m"'):
            if name not in names:
                raise InvalidRequest(
                    flag, f"{name} is not a queue", f"name one of --queues: {', '.join(names)}"
                )
            out[name] = parse_duration(flag, value)
    return out


def build(
    queues: str,
    *,
    starts: list[str],
    stricts: list[str],
    reclaim: bool = False,
    large: str | None = None,
    memory: str | None = None,
    fcfs: bool = False,
    load: float = 1.5,
    measure: str = "4h",
    min_runtime: str = "5m",
    max_duration: str = "6h",
) -> QueueSetup:
    """The setup the flags describe."""
    pairs = parse_queues(queues)
    names = tuple(n for n, _ in pairs)
    strict = per_queue_durations("--strict", stricts, names)
    try:
        specs = tuple(
            QueueSpec(n, w, reclaim=reclaim, strict_s=strict.get(n, 0.0)) for n, w in pairs
        )
    except ConfigError as err:
        raise InvalidRequest("--strict", str(err), "use 0 to 24h") from None
    if large is not None and large not in names:
        raise InvalidRequest("--queue-large", f"{large} is not a queue", "name one of --queues")
    if memory is not None and memory not in names:
        raise InvalidRequest("--queue-memory", f"{memory} is not a queue", "name one of --queues")
    if large is not None and len(names) < 2:
        raise InvalidRequest("--queue-large", "needs a second queue", 'use e.g. "A=1,B=3"')
    if not 0 < load <= 20 or math.isnan(load):
        raise InvalidRequest("--load", f"{load} is out of range", "use a factor such as 1.5")
    measure_s = parse_duration("--measure", measure)
    if not 0 < measure_s <= MAX_SPAN_S:
        raise InvalidRequest("--measure", f"{measure} is out of range", "use 1m to 7d")
    start_s = per_queue_durations("--queue-start", starts, names)
    for name, start in start_s.items():
        if start > MAX_SPAN_S:
            raise InvalidRequest("--queue-start", f"{name}: {start:g} s is too late", "use 0 to 7d")
    longest = parse_duration("--max-duration", max_duration)
    if longest < 60:
        raise InvalidRequest("--max-duration", f"{max_duration} is too short", "use 1m or more")
    return QueueSetup(
        specs,
        start_s,
        load=load,
        fcfs=fcfs,
        large=large,
        memory=memory,
        measure_s=measure_s,
        min_runtime_s=parse_duration("--min-runtime", min_runtime),
        max_duration_s=longest,
    )
