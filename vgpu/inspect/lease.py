"""Whether the extender is up, from its leader Lease: who holds it and when it was last renewed.

The extender's replicas elect a binding leader with a coordination.k8s.io Lease
(`vgpu.adapters.leader`): the leader renews `spec.renewTime` every few seconds, and a Lease not
renewed within `spec.leaseDurationSeconds` has no live holder. So a stale or missing Lease means
no replica binds, and vgpu pods stay Pending however much room there is (the report once
looked healthy with the extender down). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

DEFAULT_LEASE = "vgpu-system/vgpu-extender"
"""The Lease the chart's extender holds (--lease-namespace / --lease-name)."""


@dataclass(frozen=True, slots=True)
class ExtenderStatus:
    """The extender's Lease as the report shows it."""

    lease: str
    """`namespace/name` of the Lease."""
    holder: str = ""
    age_s: float | None = None
    """Seconds since the holder last renewed it (None: never, or not known)."""
    duration_s: int = 0
    found: bool = True

    @property
    def up(self) -> bool:
        """A holder renewed the Lease within its duration."""
        return bool(self.holder) and self.age_s is not None and self.age_s <= self.duration_s

    def line(self) -> str:
        """One line for the report."""
        if not self.found:
            return (
                f"Extender: DOWN? no Lease {self.lease} (is the vgpu extender installed, with "
                "leader election on?)"
            )
        if not self.holder:
            return f"Extender: DOWN: Lease {self.lease} has no holder"
        age = "never renewed" if self.age_s is None else f"renewed {_age(self.age_s)} ago"
        state = "up" if self.up else f"DOWN: not renewed within {self.duration_s}s"
        return f"Extender: {state}, leader {self.holder} ({age}; Lease {self.lease})"

    def problem(self) -> str:
        """The line under Problems when it is not up, with what to look at."""
        return self.line().removeprefix("Extender: ") + (
            "; no vgpu pod is bound while no replica leads (kubectl -n vgpu-system get "
            "pods,lease; the extender's log)"
        )


def extender_status(lease: Mapping[str, Any] | None, name: str, now: datetime) -> ExtenderStatus:
    """Read a Lease object (None: there is none) as of `now`."""
    if lease is None:
        return ExtenderStatus(name, found=False)
    spec = lease.get("spec") or {}
    meta = lease.get("metadata") or {}
    if meta.get("name"):  # a saved snapshot's Lease is named in it
        name = f"{meta.get('namespace') or 'default'}/{meta['name']}"
    holder = spec.get("holderIdentity")
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    return ExtenderStatus(
        name,
        holder if isinstance(holder, str) else "",
        None if renewed is None else max(0.0, (now - renewed).total_seconds()),
        duration if isinstance(duration, int) else 0,
    )


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time, with or without fractions (a Lease's MicroTime, a snapshot's
    takenAt); None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"
