"""Planning a gang's members at once: the planner the coordinator calls, and the kubelet's
reuse of init-container GPUs folded in and out around it.

The coordinator (`vgpu.extender.gangs.coordinator`) decides *when* a gang is planned and holds what
the plan gives; this module decides *what* the plan is and which members it covers, reading the
cache through `GangCache` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from vgpu.api.nodefit import NO_NODE_ADMITS, NodeFacts, NodeTerms, admits_none, allowed_by_pod
from vgpu.api.podspec import PodSpec
from vgpu.core import gang as gang_planning
from vgpu.core.fit import Verdict
from vgpu.core.ids import GangKey, PodKey
from vgpu.core.kubelet_reuse import Role, expand, merged, reuses
from vgpu.core.model import GangRef, PodRequest
from vgpu.core.queues import whole_gpus
from vgpu.core.queues.whole_gpus import NO_KEEP, Keep
from vgpu.core.scheduler import Scheduler
from vgpu.extender.gangs.cache_view import GangCache

Planner = Callable[
    [Scheduler, GangKey, list[PodRequest], Keep, gang_planning.Allowed],
    "gang_planning.GangPlan | gang_planning.GangFailure",
]


def core_planner(
    scheduler: Scheduler,
    gang: GangKey,
    members: list[PodRequest],
    keep: Keep,
    allowed: gang_planning.Allowed,
) -> gang_planning.GangPlan | gang_planning.GangFailure:
    """The core's all-or-nothing planner (swappable for tests or a better planner), each member
    on the nodes `allowed` gives it, keeping idle GPUs for the queues `keep` names (a queue
    pass's; `NO_KEEP` elsewhere: the planner's own plan), `whole_gpus.plan_gang`."""
    return whole_gpus.plan_gang(scheduler, gang, members, keep, allowed)


def plan_gang(
    planner: Planner,
    scheduler: Scheduler,
    ref: GangRef,
    members: list[PodRequest],
    pods: Mapping[PodKey, PodSpec],
    facts: Mapping[str, NodeFacts],
    keep: Keep = NO_KEEP,
) -> gang_planning.GangPlan | str:
    """Plan the gang's `members` (each marked with `ref`), or say why they cannot all have a
    place; each member only on the nodes its own nodeSelector, required node affinity and
    tolerations allow against the nodes' `facts` (`vgpu.api.nodefit`: kube-scheduler never
    offers it another); members with vGPU init containers are planned as the one container the
    kubelet's reuse makes them (`vgpu.core.kubelet_reuse`) and then expanded. `keep`: the
    queues a release pass keeps idle GPUs for (`vgpu.core.queues.whole_gpus`)."""
    gang = ref.key
    members = [replace(m, gang=ref) for m in members]
    roles = {m.key: _roles(pods, m.key) for m in members}
    gpu_mib = max((g.memory_mib for ns in scheduler.state.nodes() for g in ns.gpus), default=0)
    asked = []
    for m in members:
        mine = roles[m.key]
        one = merged(m, mine, gpu_mib) if reuses(m, mine) else m
        if isinstance(one, Verdict):
            return f"gang {gang}: member {m.key}: {one}"
        asked.append(one)
    terms = {m.key: spec.terms for m in members if (spec := pods.get(m.key)) is not None}
    allowed = allowed_by_pod(terms, facts, scheduler.state.node_names())
    result = planner(scheduler, gang, asked, keep, allowed)
    if isinstance(result, gang_planning.GangFailure):
        return str(result)
    by_key = {m.key: m for m in members}
    out = []
    for a in result.assignments:
        m = by_key[a.pod]
        mine = roles[m.key]
        if reuses(m, mine):
            ns = scheduler.state.node(a.node)
            gpu = next(g for g in ns.gpus if g.uuid == a.shares[0].uuid)
            a = expand(a, m, mine, gpu.memory_mib)
        out.append(a)
    return replace(result, assignments=tuple(out))


def _roles(pods: Mapping[PodKey, PodSpec], key: PodKey) -> Mapping[str, Role]:
    spec = pods.get(key)
    return spec.roles if spec is not None else {}


def unplaced_members(cache: GangCache, gang: GangKey) -> list[PodRequest]:
    """Members that exist, are unbound and hold nothing yet."""
    out = []
    for key in sorted(cache.members.get(gang, set())):
        spec = cache.pods.get(key)
        if spec is not None and not spec.node and cache.ledger.holding(key) is None:
            out.append(spec.request)
    return out


def stranded_member(cache: GangCache, gang: GangKey) -> str | None:
    """Why the gang can never be complete, if a member not yet bound may run on no node (its
    nodeSelector, required node affinity and tolerations rule out every node watched):
    kube-scheduler never schedules it, so its filter fails and preemption evicts nobody for
    the others. Each distinct value of the terms is matched against the nodes once."""
    facts = cache.node_facts
    seen: dict[NodeTerms, bool] = {}
    for key in sorted(cache.members.get(gang, set())):
        spec = cache.pods.get(key)
        if spec is None or spec.node:
            continue
        if spec.terms not in seen:
            seen[spec.terms] = admits_none(spec.terms, facts)
        if seen[spec.terms]:
            return f"member {key}: {NO_NODE_ADMITS}"
    return None


def invalid_member(cache: GangCache, gang: GangKey) -> str | None:
    """Why a member of the gang cannot be read, if one cannot (the gang waits for it)."""
    for key, problem in cache.invalid.items():
        if key.split("/", 1)[0] == gang.split("/", 1)[0] and key in cache.members.get(gang, set()):
            return f"member {key} is invalid: {problem}"
    return None
