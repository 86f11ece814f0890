"""Where the leader's queue pass places a job, and what reclaim reads of the cluster.

`JobFits` is `release.plan`'s `fits` (`vgpu.extender.queues.release_pass`): a job placed whole
on real GPUs now and its place held, a gang through the gang coordinator, a single pod as a gang
of one; each pod only on the nodes its nodeSelector, required node affinity and tolerations
allow (`vgpu.api.nodefit`). `whole` is reclaim's what-if. The helpers read the ledger: what a
placed pod holds (`places_held`, for the memory a queue counts), which GPUs (`gpus_of`), and
what is free on a node (`free_units`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from vgpu.api.nodefit import NO_TERMS, NodeTerms, allowed_nodes
from vgpu.api.queues.pods import Queued
from vgpu.core import gang as gang_planning
from vgpu.core.headroom import Headroom, fits_nowhere, headroom
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.model import Assignment, GangRef, GpuShare
from vgpu.core.queues import whole_gpus
from vgpu.core.queues.proportion import ZERO, Vec
from vgpu.core.queues.release import Job
from vgpu.core.queues.whole_gpus import Keep
from vgpu.core.units import mib_to_mmib
from vgpu.extender.queues.cache_view import QueueCache, QueueParts


class JobFits:
    """`release.plan`'s `fits`: a job placed whole now and its place held (module doc)."""

    def __init__(
        self, parts: QueueParts, recs: Mapping[str, Queued], members: Mapping[str, tuple[str, ...]]
    ) -> None:
        self._parts, self._recs, self._members = parts, recs, members
        self._nowhere: set[tuple[object, ...]] = set()
        """Shapes of single pods that fit nowhere this pass: the pass's own reservations only
        take capacity, so they fit nowhere for the rest of it (a pod freed meanwhile is seen
        by the next pass)."""
        self._room: Headroom | None = None
        """The most any node offered at the pass's first placement (`vgpu.core.headroom`): the
        pass's reservations only take capacity, so a pod it rules out fits nowhere for the rest
        of the pass, without a `Scheduler.select` over every node."""
        self._eligible: dict[NodeTerms, list[NodeName] | None] = {}
        """The nodes each pod's node constraints allow (`vgpu.api.nodefit`), per value of
        them, for the pass; None: every node."""

    def nodes_for(self, key: str) -> list[NodeName] | None:
        """The nodes kube-scheduler's filters would let pod `key` use, by its nodeSelector,
        required node affinity and tolerations (`vgpu.api.nodefit`); None when that is every
        node, so the placement is exactly as without constraints. The caller holds the cache's
        lock."""
        rec = self._recs.get(key)
        terms = rec.terms if rec is not None else NO_TERMS
        if terms not in self._eligible:
            cache = self._parts.cache
            names = [NodeName(n) for n in cache.node_states]
            self._eligible[terms] = allowed_nodes(terms, cache.node_facts, names)
        return self._eligible[terms]

    def job_nodes(self, job: Job) -> frozenset[str] | None:
        """The nodes any of the job's pods may use (None: every node): reclaim evicts only
        there, since nothing freed elsewhere can let the job in."""
        with self._parts.cache.atomic():
            allowed: set[str] = set()
            for key in self._members[job.key]:
                names = self.nodes_for(key)
                if names is None:
                    return None
                allowed.update(names)
            return frozenset(allowed)

    def __call__(self, job: Job, keep: Keep) -> bool:
        """Place the job and hold its place, under the cache's lock for this job only; then
        give the interpreter to a waiting verb (module doc). A single pod goes where
        `whole_gpus.select` puts it, a gang's members where `whole_gpus.plan_gang` does: to a
        hole first while `keep` names a queue."""
        try:
            with self._parts.cache.atomic():
                return self._place(job, keep)
        finally:
            time.sleep(0)

    def _place(self, job: Job, keep: Keep) -> bool:
        cache, keys = self._parts.cache, self._members[job.key]
        if all(cache.holding(PodKey(k)) is not None for k in keys):
            return True
        if job.ask == ZERO:
            return True
        specs = [cache.pod(PodKey(k)) for k in keys]
        if any(s is None for s in specs):
            return False
        first = specs[0]
        assert first is not None
        scheduler, now = self._parts.scheduler(), self._parts.clock()
        if first.gang is not None:
            size = self._recs[keys[0]].pod.gang_size
            placed = cache.gangs.place_of(first.request, first.gang, size, scheduler, now, keep)
            return isinstance(placed, Assignment)
        terms = self._recs[keys[0]].terms if keys[0] in self._recs else NO_TERMS
        shape = (first.request.shape, terms)
        names = self.nodes_for(keys[0])
        if self._room is None:  # under the lock: the cluster as this pass first places
            self._room = headroom(cache.node_states.values())
        chosen = None
        anywhere = names is None or bool(names)
        if anywhere and shape not in self._nowhere and not fits_nowhere(self._room, first.request):
            chosen = whole_gpus.select(scheduler, first.request, keep, names=names)
        if chosen is None:
            self._nowhere.add(shape)  # nowhere: no need for the planner's why
            return False
        gang = GangKey(f"{job.namespace}/queue:{keys[0].split('/', 1)[1]}")
        one = gang_planning.GangPlan(gang, (chosen.assignment,))  # a gang of one
        cache.reserve_gang(one, now + self._parts.config.gang_timeout)
        return True

    def pods(self, job: Job) -> int:
        """How many pods the job has (one runs on one node; a gang may span nodes)."""
        return len(self._members[job.key])

    def whole(self, job: Job) -> bool:
        """Whether the job would be placed whole now (no place held: a what-if; the caller
        holds the cache's lock, `CacheOps.without`)."""
        specs = [self._parts.cache.pod(PodKey(k)) for k in self._members[job.key]]
        requests = [s.request for s in specs if s is not None]
        if len(requests) < len(specs):
            return False
        scheduler = self._parts.scheduler()
        nodes = {r.key: self.nodes_for(str(r.key)) for r in requests}
        if any(scheduler.select(r, nodes[r.key]) is None for r in requests):
            return False  # a member that fits nowhere alone: no need for the planner's why
        ref = GangRef(GangKey(job.key), len(requests))
        requests = [replace(r, gang=ref) for r in requests]
        allowed = {k: n for k, n in nodes.items() if n is not None}
        result = gang_planning.plan(scheduler, GangKey(job.key), requests, allowed=allowed)
        return isinstance(result, gang_planning.GangPlan)


def places_held(cache: QueueCache, recs: Iterable[Queued]) -> dict[str, tuple[GpuShare, ...]]:
    """What each of `recs` holding a place (reserved, assumed or bound) holds, as the ledger
    says (`Assignment.charged`), for `counted`: a placed pod counts the memory of its place, not
    the largest GPU's. A holding made for another pod of the same name (its UID differs) is not
    this pod's. The caller holds the cache's lock."""
    out: dict[str, tuple[GpuShare, ...]] = {}
    for r in recs:
        holding = cache.holding(PodKey(r.pod.key))
        if holding is None:
            continue
        uid = holding.assignment.uid
        if uid and r.uid and uid != r.uid:
            continue
        out[r.pod.key] = holding.assignment.charged
    return out


def gpus_of(parts: QueueParts, key: str) -> tuple[str, ...]:
    """The GPUs a running pod holds, as the ledger says (none known: empty), for reclaim's
    search per node, which tries victims on few GPUs first."""
    holding = parts.cache.holding(PodKey(key))
    if holding is None:
        return ()
    return tuple(sorted({str(s.uuid) for s in holding.assignment.shares}))


def free_units(parts: QueueParts) -> Callable[[str], Vec]:
    """What is free on a node in the queues' units (reclaim's candidate nodes): core units and
    memory blocks of its healthy GPUs; nothing on a node the cache does not know."""
    unit_mmib = mib_to_mmib(parts.config.memory_unit_mib)

    def free(node: str) -> Vec:
        with parts.cache.atomic():  # one node's read: the pass holds no lock between reads
            ns = parts.cache.node_states.get(NodeName(node))
            if ns is None:
                return ZERO
            cores = memory = 0
            for gpu, f_cores, f_mem in zip(ns.node.gpus, ns.free_cores, ns.free_mem, strict=True):
                if gpu.healthy:
                    cores += f_cores
                    memory += f_mem // unit_mmib
            return (cores, memory)

    return free
