"""Gang planning: place every member of a pod group, or none.

The whole gang is planned on a fork of the cluster state: members are placed one by one with the
scheduler's policy (largest GPU asks first, CPU-only members last, so big members are not
squeezed out by small ones), each seeing the capacity the earlier ones took. Either every member
fits and the plan is returned, or the fork is reverted and the failure says which member found no
room and why. Each member is placed only on the nodes `allowed` lets it use (the nodes
kube-scheduler's own filters would pass it on, by its node selector, required affinity and
tolerations: `vgpu.api.nodefit`), since kube-scheduler never offers a member any other node.
Planning never changes the state; `reserve` then holds the plan's capacity with a
deadline, and `release` gives a gang's reservations back (both idempotent).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import Assignment, Phase, PodRequest
from vgpu.core.scheduler import Scheduler, Selection

Choose = Callable[[PodRequest, list[NodeName] | None], Selection | None]
"""Where one member goes on the fork, among `names` (None: every node): the policy's choice
(`Scheduler.select`) unless the caller places members otherwise (`queues.whole_gpus`)."""
Allowed = Mapping[PodKey, Sequence[NodeName]]
"""The nodes each member may use (those kube-scheduler's node filters pass it on); a member not
in it may use every node."""


@dataclass(frozen=True, slots=True)
class GangPlan:
    """Where every member of a gang goes."""

    gang: GangKey
    assignments: tuple[Assignment, ...]

    def for_pod(self, pod: PodKey) -> Assignment | None:
        """The planned assignment of one member."""
        return next((a for a in self.assignments if a.pod == pod), None)


@dataclass(frozen=True, slots=True)
class GangFailure:
    """Why a gang cannot be placed as a whole; nothing was reserved."""

    gang: GangKey
    placed: int
    total: int
    blocked: PodKey
    reason: str

    def __str__(self) -> str:
        return (
            f"gang {self.gang}: only {self.placed} of {self.total} members fit; "
            f"{self.blocked} fits nowhere after them ({self.reason})"
        )


def member_order(members: Sequence[PodRequest]) -> list[PodRequest]:
    """Whole-GPU members first (most GPUs first), then shares (largest first), CPU-only last."""

    def rank(p: PodRequest) -> tuple[int, int, int, str]:
        whole = sum(c.gpus for c in p.gpu_containers if c.whole)
        share = sum(c.cores for c in p.gpu_containers if not c.whole)
        return (-whole, -share, -p.cpu_milli, p.key)

    return sorted(members, key=rank)


_RULED_OUT = "ruled out by its node constraints (nodeSelector, node affinity, taints, resources)"
"""Why a member was not placed on the nodes `allowed` leaves out."""


def _why_nowhere(scheduler: Scheduler, pod: PodRequest, names: list[NodeName] | None) -> str:
    every = scheduler.state.node_names()
    verdicts = scheduler.filter(pod, names if names is not None else every)
    codes = Counter(v.code.value for v in verdicts.values() if not v.ok)
    if names is not None and len(names) < len(every):
        codes[_RULED_OUT] = len(every) - len(names)
    if not codes:
        return "no nodes"
    return ", ".join(f"{n} node(s) {code}" for code, n in codes.most_common())


def present(
    pod: PodKey,
    members: Iterable[PodKey],
    holds: Callable[[PodKey], bool],
    bound: Callable[[PodKey], bool],
) -> int:
    """How many of a gang's members (`pod`, one of them, counted) count towards its size: those
    holding a place (reserved, assumed or bound) and those bound nowhere (a plan places them).
    A member bound where nothing holds it (a node the ledger cannot count, not known yet) is
    neither: no plan places it or sets it aside. The one count for whether a gang can be
    placed (its filter) and whether evictions could let it in (preemption): counted two ways,
    a tenant's member created with `spec.nodeName` of an unknown node left the filter waiting
    for members while preemption evicted another team's pods for it."""
    return sum(1 for key in {*members, pod} if holds(key) or not bound(key))


def plan(
    scheduler: Scheduler,
    gang: GangKey,
    members: Sequence[PodRequest],
    choose: Choose | None = None,
    allowed: Allowed | None = None,
) -> GangPlan | GangFailure:
    """Plan all members at once on a fork, each where `choose` puts it (by default the
    policy's choice) among the nodes `allowed` gives it (None: every member may use every
    node); the state is unchanged afterwards."""
    state = scheduler.state
    place = choose or scheduler.select
    among = allowed or {}
    ordered = member_order(members)
    placed: list[Assignment] = []
    state.fork()
    try:
        for pod in ordered:
            names = list(among[pod.key]) if pod.key in among else None
            selection = place(pod, names)
            if selection is None:
                return GangFailure(
                    gang, len(placed), len(ordered), pod.key, _why_nowhere(scheduler, pod, names)
                )
            state.charge(selection.assignment)
            placed.append(selection.assignment)
    finally:
        state.revert()
    by_key = {a.pod: a for a in placed}
    return GangPlan(gang, tuple(by_key[p.key] for p in members))


def reserve(ledger: Ledger, gang_plan: GangPlan, *, deadline: float) -> None:
    """Hold every member's place until `deadline` (all or nothing: reverted on any conflict)."""
    state = ledger.state
    state.fork()
    try:
        for assignment in gang_plan.assignments:
            ledger.reserve(assignment, deadline=deadline, gang=gang_plan.gang)
    except BaseException:
        state.revert()
        raise
    state.commit()


def release(ledger: Ledger, gang: GangKey) -> list[PodKey]:
    """Give back every *reservation* of a gang (bound members stay). Returns the released pods."""
    pods = [
        h.assignment.pod for h in ledger.holdings() if h.gang == gang and h.phase is Phase.RESERVED
    ]
    for pod in pods:
        ledger.release(pod)
    return pods
