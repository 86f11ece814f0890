"""Whole GPUs kept for the queues that wait for them: a small pod goes to a hole first.

A release pass fills GPUs in fair order. A queue whose jobs ask whole GPUs needs *idle* GPUs (no
core and no memory held), and a pass can give the GPU that has just emptied to a small pod of
another queue while a partly used GPU (a **hole**) would have taken that pod just as well: the
policy's score may prefer the idle GPU (its fragmentation buckets, or a workload it has not
learned to hold the whole-GPU shape), and the whole-GPU queue, below its share, loses the GPU for
as long as the small pod runs. This was seen on a real cluster, a 25-core pod placed on a
just-emptied GPU while a 25-core hole waited on another node, in the same pass.

So `release.plan` tells the placement which queues wait for whole GPUs (`Keep`: the queues below
their deserved share with a whole-GPU job not yet released in the pass) and the placement
(`select`) keeps idle GPUs while that is so: a pod asking part of a GPU that the policy would put
on an idle GPU goes to the best hole that fits it instead, when one exists anywhere; otherwise to
the policy's own choice. With no such queue (`Keep` empty) the placement is the policy's, exactly.

A gang's members are placed together by the gang planner (`gang.plan`), which in a pass places
each member through `select` too (`plan_gang`), each seeing the GPUs the earlier members took
(a GPU a member took is a hole for the next). Only if that leaves a member nowhere (a hole on a
node short of CPU for a later member, say) is the gang placed as the planner alone places it: the
keep never makes a gang that fits not fit. A waiting gang whose members ask whole GPUs is one of
the jobs `Keep` protects, like a single pod (`jobs.group`). The extender's release pass places
single pods and gangs through this module; the simulator's replay, whose pods are all single,
through `select`. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from vgpu.core import gang as gang_planning
from vgpu.core.gang import Allowed, GangFailure, GangPlan
from vgpu.core.ids import GangKey, GpuUUID, NodeName
from vgpu.core.model import PodRequest
from vgpu.core.scheduler import Scheduler, Selection
from vgpu.core.state import ClusterState


@dataclass(frozen=True, slots=True)
class Keep:
    """The queues that wait for whole GPUs in this pass (below their deserved share, with a
    whole-GPU job not released yet): while there is one, small pods go to holes first."""

    queues: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.queues)


NO_KEEP = Keep()
"""No queue waits for whole GPUs: the policy places as it would without queues."""


def asks_whole(pod: PodRequest) -> bool:
    """Whether every GPU the pod asks is a whole one (a pod a hole cannot take)."""
    wanted = pod.gpu_containers
    return bool(wanted) and all(c.whole for c in wanted)


def select(
    scheduler: Scheduler,
    pod: PodRequest,
    keep: Keep,
    first: Callable[[PodRequest], Selection | None] | None = None,
    names: Iterable[NodeName] | None = None,
    in_holes: Callable[[PodRequest], Selection | None] | None = None,
) -> Selection | None:
    """Where `pod` goes in a release pass: the policy's choice (`first`, by default
    `scheduler.select` over `names`, None for every node), or, while `keep` names a queue and
    that choice takes an idle GPU for a pod asking part of a GPU, the policy's best choice among
    the holes that fit it, when one does (module doc). `in_holes(pod)` must answer
    `scheduler.select(holes_only(state, pod), names)`, the pod refusing every idle GPU; a caller
    that keeps each node's evaluations passes a cheaper way to it (the simulator's
    `BestNodes.in_holes`)."""
    listed = None if names is None else list(names)
    chosen = first(pod) if first is not None else scheduler.select(pod, listed)
    if chosen is None or not keep or not pod.wants_gpu or asks_whole(pod):
        return chosen
    state = scheduler.state
    if not takes_idle(state, chosen):
        return chosen
    in_hole = (  # the same pod, key and all
        scheduler.select(holes_only(state, pod), listed) if in_holes is None else in_holes(pod)
    )
    return chosen if in_hole is None else in_hole


def idle_gpus(state: ClusterState) -> frozenset[GpuUUID]:
    """The GPUs with no core and no memory held."""
    return frozenset(
        gpu.uuid for ns in state.nodes() for p, gpu in enumerate(ns.gpus) if ns.is_idle_gpu(p)
    )


def takes_idle(state: ClusterState, chosen: Selection) -> bool:
    """Whether the selection puts a share on a GPU that is idle now."""
    ns = state.node(chosen.node)
    return any(ns.is_idle_gpu(ns.positions[s.uuid]) for s in chosen.assignment.shares)


def holes_only(state: ClusterState, pod: PodRequest) -> PodRequest:
    """The pod as if it refused every idle GPU: placed by the same policy, on holes only."""
    sel = pod.selector
    return replace(pod, selector=replace(sel, exclude_uuids=sel.exclude_uuids | idle_gpus(state)))


def plan_gang(
    scheduler: Scheduler,
    gang: GangKey,
    members: Sequence[PodRequest],
    keep: Keep,
    allowed: Allowed | None = None,
) -> GangPlan | GangFailure:
    """A gang's plan in a release pass (`gang.plan`, each member among the nodes `allowed`
    gives it): while `keep` names a queue, each member is placed as `select` places a single
    pod, each seeing the GPUs the earlier ones took (module doc); if that leaves a member
    nowhere, the planner's own plan, so the keep never makes a gang that fits not fit. With
    `keep` empty, or no member asking part of a GPU, the planner's own plan, exactly."""
    if keep and any(m.wants_gpu and not asks_whole(m) for m in members):

        def choose(pod: PodRequest, among: list[NodeName] | None) -> Selection | None:
            return select(scheduler, pod, keep, names=among)

        kept = gang_planning.plan(scheduler, gang, members, choose, allowed)
        if isinstance(kept, GangPlan):
            return kept
    return gang_planning.plan(scheduler, gang, members, allowed=allowed)
