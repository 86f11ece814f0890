"""Replaying a workload with gangs: all-or-nothing planning versus members placed one by one.

Units arrive in order; a unit is one pod or every member of a gang (`variants.gangs`).

* ``plan`` (gang-aware, the default policy's way): `gang.plan` places every member on a fork of
  the cluster; the gang is admitted and charged if all fit, otherwise nothing is placed.
* ``independent`` (a scheduler without gang support): members are placed one by one as if they
  were unrelated pods. If some member finds no room the gang is not admitted, and the members
  already placed *keep* their GPUs: they are bound pods waiting for peers that never come, as
  with kube-scheduler without coscheduling. Their GPUs are allocated but do no work ("wasted").

Allocation counts *useful* GPUs only: single pods and members of admitted gangs. Arrived work
counts every pod, failed or not, as in `engine`.
"""

from __future__ import annotations

from random import Random

from vgpu.core.gang import GangPlan, plan
from vgpu.core.ledger import Ledger
from vgpu.core.model import Node, PodRequest
from vgpu.core.policy.interface import Policy
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.sim.engine import RunResult, Tally, capacity_milli

GANG_MODES = ("plan", "independent")


def _one_by_one(scheduler: Scheduler, ledger: Ledger, members: list[PodRequest]) -> int:
    """Place members independently; returns how many got placed (they stay placed)."""
    placed = 0
    for pod in members:
        selection = scheduler.select(pod)
        if selection is None:
            continue
        ledger.confirm(selection.assignment)
        placed += 1
    return placed


def _planned(scheduler: Scheduler, ledger: Ledger, members: list[PodRequest]) -> bool:
    gang = members[0].gang
    assert gang is not None
    result = plan(scheduler, gang.key, members)
    if not isinstance(result, GangPlan):
        return False
    for assignment in result.assignments:
        ledger.confirm(assignment)
    return True


def replay_units(
    nodes: tuple[Node, ...], units: list[list[PodRequest]], policy: Policy, *, seed: int, mode: str
) -> RunResult:
    """Place `units` in order with `policy`, gangs by `mode` ("plan" or "independent").

    `pods_placed` and `pods_failed` count pods of admitted and of not admitted units.
    """
    if mode not in GANG_MODES:
        raise ValueError(f"gang mode {mode!r}: use one of {', '.join(GANG_MODES)}")
    tally = Tally(policy.name, seed, capacity_milli(nodes))
    state = ClusterState(nodes)
    ledger = Ledger(state)
    scheduler = Scheduler(state, policy, rng=Random(seed))
    arrived = useful = wasted = placed = failed = 0
    gangs = admitted = gang_gpu = 0
    for unit in units:
        demand = sum(p.gpu_milli for p in unit)
        arrived += demand
        if len(unit) == 1 and unit[0].gang is None:
            ok = _one_by_one(scheduler, ledger, unit) == 1
        else:
            gangs += 1
            if mode == "plan":
                ok = _planned(scheduler, ledger, unit)
            else:
                ok = _one_by_one(scheduler, ledger, unit) == len(unit)
                if not ok:
                    wasted += _held(state, unit)
            if ok:
                admitted += 1
                gang_gpu += demand
        if ok:
            useful += demand
            placed += len(unit)
        else:
            failed += len(unit)
        tally.record(arrived, useful)
    extra = {
        "gangs": gangs,
        "gangs_admitted": admitted,
        "gang_gpus_admitted": round(gang_gpu / 1000, 1),
        "wasted_pct_final": tally.pct(wasted),
    }
    return tally.result(useful, placed, failed, extra=extra)


def _held(state: ClusterState, unit: list[PodRequest]) -> int:
    """GPU milli held by those members of a failed gang that did get placed."""
    return sum(state.holdings[p.key].assignment.gpu_milli for p in unit if p.key in state.holdings)
