"""The cache's operations for binds, gang reservations and preemption's what-if.

Each takes the cache's lock itself (it is re-entrant, so a verb holding it across several steps
may call them): the bind flow, the gang coordinator and preemption change the extender's state
only through these.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from vgpu.core import gang as gang_planning
from vgpu.core.ids import GangKey, PodKey
from vgpu.core.model import Assignment, Holding, Phase
from vgpu.extender.cacheviews import CacheFields
from vgpu.extender.podspec import PodSpec


class CacheOps(CacheFields):
    """Operations of `ClusterCache` other modules call to change or query one pod's state."""

    # -- binds -----------------------------------------------------------------------------------
    def pod(self, key: PodKey) -> PodSpec | None:
        """The pod as the watch (or `remember`) shows it."""
        with self.lock:
            return self._pods.get(key)

    def holding(self, key: PodKey) -> Holding | None:
        """What the ledger holds for a pod."""
        with self.lock:
            return self._ledger.holding(key)

    def release(self, key: PodKey) -> None:
        """Give a pod's holding back, whatever its phase."""
        with self.lock:
            self._ledger.release(key)

    def binding(self, key: PodKey) -> bool:
        """Whether a bind of this pod is in flight."""
        with self.lock:
            return key in self._binding

    def assume(self, assignment: Assignment, now: float) -> None:
        """Hold `assignment` for a bind starting now (raises `Conflict` if the pod holds
        another place); the bind is in flight until `bind_done`."""
        with self.lock:
            self._ledger.assume(assignment)
            self._binding.add(assignment.pod)
            self._assumed_at[assignment.pod] = now

    def bind_done(self, key: PodKey) -> None:
        """The bind call returned (its assumption stays until confirmed, dropped or expired)."""
        with self.lock:
            self._binding.discard(key)

    def drop_assumption(self, key: PodKey) -> Holding | None:
        """The bind definitely failed: release the pod's assumption; returns it if there was
        one (a reservation or a bound holding is kept)."""
        with self.lock:
            self._assumed_at.pop(key, None)
            held = self._ledger.holding(key)
            if held is None or held.phase is not Phase.ASSUMED:
                return None
            self._ledger.release(key)
            return held

    def expire_assumptions(self, now: float, ttl: float) -> None:
        """Release assumptions older than `ttl` whose bind is no longer in flight."""
        with self.lock:
            for key, since in list(self._assumed_at.items()):
                if since + ttl > now or key in self._binding:
                    continue
                del self._assumed_at[key]
                held = self._ledger.holding(key)
                if held is not None and held.phase is Phase.ASSUMED:
                    self._ledger.release(key)

    def forget_assumptions(self) -> None:
        """Forget when assumptions were made (after a rebuild they are gone)."""
        with self.lock:
            self._assumed_at.clear()

    def notify_changed(self) -> None:
        """Wake the binds waiting in `wait_changed` (a gang member was filtered)."""
        with self.lock:
            self.changed.notify_all()

    def wait_changed(self, timeout: float) -> None:
        """Wait (holding the lock) until a pod event or `timeout` seconds."""
        with self.lock:
            self.changed.wait(timeout)

    # -- gang reservations -----------------------------------------------------------------------
    def reserve_gang(self, plan: gang_planning.GangPlan, deadline: float) -> None:
        """Hold every member's place of a planned gang until `deadline` (all or nothing)."""
        with self.lock:
            gang_planning.reserve(self._ledger, plan, deadline=deadline)

    def release_gang(self, gang: GangKey) -> list[PodKey]:
        """Give back every reservation of a gang (bound members stay); the released pods."""
        with self.lock:
            return gang_planning.release(self._ledger, gang)

    def extend_reservation(self, key: PodKey, deadline: float) -> None:
        """Move a reservation's deadline (other holdings are left alone)."""
        with self.lock:
            self._ledger.extend(key, deadline)

    # -- preemption ------------------------------------------------------------------------------
    @contextmanager
    def without(self, gone: Iterable[PodKey]) -> Iterator[None]:
        """The state as if the `gone` pods' holdings were released, reverted on exit."""
        with self.lock, self.state.what_if():
            for key in gone:
                self._ledger.release(key)
            yield
