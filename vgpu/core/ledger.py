"""The ledger: who holds which GPU shares, through assume → confirm → release.

* `reserve` holds capacity for a gang member that is not yet bound; it carries a deadline.
* `assume` holds capacity for a pod the scheduler has chosen but the API server has not yet
  confirmed (optimistic, like kube-scheduler's assume cache).
* `confirm` marks a holding as bound (observed on the API server).
* `release` gives capacity back.

Every operation is idempotent: repeating it with the same assignment changes nothing, so a retried
bind or a replayed watch event never allocates twice. A *different* assignment for a pod that is
already held is a `Conflict`, never a silent double charge. `rebuild` reconstructs the ledger from
observed assignments (after a restart) and reports the ones that do not fit instead of crashing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from vgpu.core.errors import Conflict
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.model import Assignment, Holding, Phase
from vgpu.core.state import ClusterState


@dataclass(frozen=True, slots=True)
class Rejected:
    """An observed assignment `rebuild` could not hold, and why."""

    assignment: Assignment
    reason: str


class Ledger:
    """Assume/confirm/release bookkeeping over a `ClusterState` (which journals it for forks)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def holding(self, pod: PodKey) -> Holding | None:
        """What the ledger holds for a pod, if anything."""
        return self.state.holdings.get(pod)

    def holdings(self) -> list[Holding]:
        """Every holding."""
        return list(self.state.holdings.values())

    def on_node(self, node: NodeName) -> list[Holding]:
        """The holdings on one node."""
        return self.state.holdings_on(node)

    def _hold(self, assignment: Assignment, holding: Holding) -> bool:
        current = self.state.holdings.get(assignment.pod)
        if current is not None:
            if current.assignment != assignment:
                raise Conflict(
                    f"{assignment.pod} is already held on {current.assignment.node} "
                    f"with a different assignment"
                )
            if current.phase == Phase.BOUND and holding.phase != Phase.BOUND:
                return False
            self.state.put_holding(holding)
            return False
        self.state.charge(assignment)
        self.state.put_holding(holding)
        return True

    def reserve(
        self, assignment: Assignment, *, deadline: float, gang: GangKey | None = None
    ) -> bool:
        """Hold capacity for an unbound gang member until `deadline`. True if newly charged."""
        return self._hold(
            assignment, Holding(assignment, Phase.RESERVED, deadline=deadline, gang=gang)
        )

    def assume(self, assignment: Assignment, *, gang: GangKey | None = None) -> bool:
        """Hold capacity for a pod being bound. True if newly charged; idempotent."""
        current = self.state.holdings.get(assignment.pod)
        if gang is None and current is not None:
            gang = current.gang
        return self._hold(assignment, Holding(assignment, Phase.ASSUMED, gang=gang))

    def confirm(self, assignment: Assignment) -> bool:
        """Record a bound pod (as observed). True if newly charged; idempotent."""
        current = self.state.holdings.get(assignment.pod)
        gang = current.gang if current is not None else None
        return self._hold(assignment, Holding(assignment, Phase.BOUND, gang=gang))

    def release(self, pod: PodKey) -> Assignment | None:
        """Give a pod's capacity back. Returns what was held; releasing twice is a no-op."""
        holding = self.state.drop_holding(pod)
        if holding is None:
            return None
        self.state.refund(holding.assignment)
        return holding.assignment

    def expired(self, now: float) -> list[Holding]:
        """Reservations whose deadline has passed (the caller releases them)."""
        return [
            h
            for h in self.state.holdings.values()
            if h.phase == Phase.RESERVED and h.deadline is not None and h.deadline <= now
        ]

    def extend(self, pod: PodKey, deadline: float) -> None:
        """Move a reservation's deadline."""
        holding = self.state.holdings.get(pod)
        if holding is not None and holding.phase == Phase.RESERVED:
            self.state.put_holding(replace(holding, deadline=deadline))

    def rebuild(self, observed: Iterable[Assignment]) -> list[Rejected]:
        """Drop every holding and re-confirm observed assignments, reporting those that don't fit.

        Assignments are applied in the order given; the caller orders them by bind time so that
        the earliest claimant keeps a contested share.
        """
        for pod in list(self.state.holdings):
            self.release(pod)
        rejected: list[Rejected] = []
        for assignment in observed:
            problem = self.state.can_charge(assignment)
            if problem is not None:
                rejected.append(Rejected(assignment, problem))
                continue
            try:
                self.confirm(assignment)
            except Conflict as err:
                rejected.append(Rejected(assignment, str(err)))
        return rejected
