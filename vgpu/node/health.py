"""GPU health policy: XID events and backend failures → the set of unhealthy GPUs.

Rules (after NVIDIA's device plugin, with recovery added):
- A critical XID marks its GPU unhealthy, except application-level XIDs (`ignored_xids`,
  default 13, 31, 43, 45, 68, 109) which a misbehaving container can trigger on a healthy GPU.
- An event that can't be attributed to a GPU, or a failing backend, marks every GPU unhealthy.
- A GPU that has been quiet for `recovery_s` is healthy again; `recovery_s=None` keeps it
  unhealthy until the process restarts (NVIDIA's behaviour).

Pure: time comes from an injected clock, so tests need no sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from vgpu.node.model import XidEvent

DEFAULT_IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    ignored_xids: frozenset[int] = DEFAULT_IGNORED_XIDS
    recovery_s: float | None = 300.0

    def __post_init__(self) -> None:
        if self.recovery_s is not None and self.recovery_s < 0:
            raise ValueError(f"recovery_s: must be >= 0 or None, got {self.recovery_s}")


def parse_xid_list(text: str) -> frozenset[int]:
    """Parse a comma-separated XID list ("13,31, 43"); empty text gives the empty set."""
    xids = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        if not part.isdigit():
            raise ValueError(f"ignored XIDs: {part!r} is not an XID number; use e.g. '13,31,43'")
        xids.add(int(part))
    return frozenset(xids)


@dataclass(slots=True)
class HealthTracker:
    """Remembers when each GPU last misbehaved and answers which GPUs are unhealthy now."""

    uuids: tuple[str, ...]
    policy: HealthPolicy
    clock: Callable[[], float]
    _last_bad: dict[str, float] = field(default_factory=dict)
    _reasons: dict[str, str] = field(default_factory=dict)

    def observe(self, events: Iterable[XidEvent]) -> None:
        """Record XID events; ignored XIDs and events for unknown GPUs change nothing."""
        for event in events:
            if event.xid in self.policy.ignored_xids:
                continue
            if event.gpu_uuid is None:
                self._mark(self.uuids, f"XID {event.xid} on an unidentified GPU")
            elif event.gpu_uuid in self.uuids:
                self._mark((event.gpu_uuid,), f"XID {event.xid}")

    def backend_failed(self, reason: str) -> None:
        """The GPU backend itself failed: nothing can be vouched for, so every GPU is unhealthy."""
        self._mark(self.uuids, f"GPU backend failed: {reason}")

    def _mark(self, uuids: Iterable[str], reason: str) -> None:
        now = self.clock()
        for uuid in uuids:
            self._last_bad[uuid] = now
            self._reasons[uuid] = reason

    def unhealthy(self) -> frozenset[str]:
        """GPUs that are unhealthy at the current clock time."""
        recovery = self.policy.recovery_s
        if recovery is None:
            return frozenset(self._last_bad)
        now = self.clock()
        return frozenset(u for u, t in self._last_bad.items() if now - t < recovery)

    def reason(self, uuid: str) -> str | None:
        """Why `uuid` is unhealthy, or None when it is healthy."""
        return self._reasons[uuid] if uuid in self.unhealthy() else None
