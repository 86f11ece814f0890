"""The cache's bind holds: which binds are in flight, and when each assumption and pick was made.

A part of `ClusterCache` (`vgpu.extender.cache.cluster`), which calls it under its lock. It outlives
the cache's rebuilds (binds in flight still finish after one), so it is handed the current ledger
on every call instead of keeping one. An *assumption* holds a pod's place while its bind is in
flight and until the watch confirms it or `assume_ttl` passes; a *pick* holds the place of a pod
whose filter passed a single node until its bind arrives, its next filter, or `pick_ttl` passes.
"""

from __future__ import annotations

from collections.abc import Iterator

from vgpu.core.ids import PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import Assignment, Holding, Phase


class BindHolds:
    """Binds in flight and the times of assumptions and picks, for their expiry."""

    def __init__(self) -> None:
        self._binding: set[PodKey] = set()
        """Pods with a bind in flight (kept across rebuilds: those binds still finish)."""
        self._assumed_at: dict[PodKey, float] = {}
        """When each bind's assumption was made, for `expire`."""
        self._picked_at: dict[PodKey, float] = {}
        """When each pick was made."""

    def forget_times(self) -> None:
        """A rebuild dropped every assumption and pick (binds in flight stay in flight)."""
        self._assumed_at.clear()
        self._picked_at.clear()

    def forget_pod(self, key: PodKey) -> None:
        """A forgotten pod's holding is released with it: its pick and assumption timers go
        too (left to the sweep, they piled up wherever none ran)."""
        self._assumed_at.pop(key, None)
        self._picked_at.pop(key, None)

    def held(self) -> Iterator[PodKey]:
        """The pods with an assumption or a pick (those the ledger holds as assumed)."""
        yield from self._assumed_at
        yield from self._picked_at

    def binding(self, key: PodKey) -> bool:
        """Whether a bind of this pod is in flight."""
        return key in self._binding

    def assume(self, ledger: Ledger, assignment: Assignment, now: float) -> None:
        """Hold `assignment` for a bind starting now (raises `Conflict` if the pod holds
        another place); the bind is in flight until `bind_done`."""
        ledger.assume(assignment)
        self._binding.add(assignment.pod)
        self._assumed_at[assignment.pod] = now
        self._picked_at.pop(assignment.pod, None)

    def pick(self, ledger: Ledger, assignment: Assignment, now: float) -> None:
        """Hold a picked place unless the pod already holds one."""
        if ledger.holding(assignment.pod) is None:
            ledger.assume(assignment)
            self._picked_at[assignment.pod] = now

    def drop_pick(self, ledger: Ledger, key: PodKey) -> None:
        """Give back a pod's pick (it is being filtered again: the place is chosen anew). A pick
        kept for a bind in flight keeps its time, so that it still expires (and is still
        found by `held`)."""
        if key in self._picked_at and key not in self._binding:
            del self._picked_at[key]
            _release_assumed(ledger, key)

    def bind_done(self, key: PodKey) -> None:
        """The bind call returned (its assumption stays until confirmed, dropped or expired)."""
        self._binding.discard(key)

    def drop_assumption(self, ledger: Ledger, key: PodKey) -> Holding | None:
        """The bind definitely failed: release the pod's assumption; returns it if there was
        one (a reservation or a bound holding is kept)."""
        self._assumed_at.pop(key, None)
        held = ledger.holding(key)
        if held is None or held.phase is not Phase.ASSUMED:
            return None
        ledger.release(key)
        return held

    def expire(self, ledger: Ledger, now: float, ttl: float, pick_ttl: float) -> None:
        """Release assumptions older than `ttl` whose bind is no longer in flight, and picks
        older than `pick_ttl` (their bind never came)."""
        for key, since in list(self._assumed_at.items()):
            if since + ttl > now or key in self._binding:
                continue
            del self._assumed_at[key]
            _release_assumed(ledger, key)
        for key, since in list(self._picked_at.items()):
            if since + pick_ttl <= now:
                del self._picked_at[key]
                _release_assumed(ledger, key)


def _release_assumed(ledger: Ledger, key: PodKey) -> None:
    held = ledger.holding(key)
    if held is not None and held.phase is Phase.ASSUMED:
        ledger.release(key)
