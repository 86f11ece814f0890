"""The leader's queue pass over the extender's cache: which held pods to release, which to evict.

`QueueIndex` is a second reader of the pod watch: it keeps the pods carrying the queue label
(`vgpu.api.queues.config`), with their gates, asks and ages; the cache keeps the GPUs. `decide`
runs one pass over a snapshot of the index and of the cluster's capacity, taking the cache's lock
only for one job's placement at a time (and a reclaim what-if), never for the pass: filters run
between jobs, and after each job it gives the interpreter to a verb waiting for it (5,000 held pods
on 100 nodes held the lock for a 10 s pass, and a filter waited as long; with the lock released but
no yield, a pass running beside the serving loop still doubled a filter's p99). A single pod that
fits nowhere is found so by the cluster's headroom when it can be (`vgpu.core.headroom`: more than
any node offers, or a model no node has; taken once a pass) or else by `Scheduler.select` alone
(memoised per node and shape), without the gang planner's per-node explanation, which a pass does
not need, and its shape is not tried again in the pass (5,000 held pods of different shapes that
fit nowhere took 24-35 s a pass at 1,000 nodes, one `select` each):

* pods are grouped into whole jobs (`vgpu.core.queues.jobs`) and offered to `release.plan`;
* `fits` places a job **whole on real GPUs now and holds the place** with the very reservation the
  gang planner makes: a gang through the gang coordinator (`GangCoordinator.place_of`, held until
  kube-scheduler binds its members or the gang timeout passes), a single pod as a gang of one
  under its own key (`queue:` + the pod's name), released by the same sweep when it expires.
  Both are placed with the pass's `Keep` (`whole_gpus.select`, a gang's members through
  `whole_gpus.plan_gang`): a hole before an idle GPU while the pass says a queue waits for whole
  GPUs. Its filter then sends the pod to that place (`CacheOps.held_place`). A job whose
  members all hold a place already (a pass whose gate removal failed) fits without a second
  reservation;
* reclaim (opt-in per queue), for the waiting jobs `reclaim_asks` chooses (priority, then age,
  past those whose ask found no victims in the last minute), asks, for a single pod,
  `reclaim_nodes.victims_on_one_node` (its victims all on one node, the node needing the
  fewest), for a gang `reclaim.victims` (youngest first over the cluster: its members may span
  nodes), with a what-if on the cache
  (`CacheOps.without`), one reclaim per pass and none while earlier victims still exist; pods
  whose eviction a PodDisruptionBudget refused lately are spared (`spare`), so reclaim moves on
  to other victims instead of asking for the same refused pod every pass. Reclaim asks for no
  job with a pod held by a scheduling gate besides `vgpu.io/queue`: kube-scheduler sees it only
  once its author (or another controller) removes that gate, so what reclaim freed for it would
  wait for the reservation's timeout (a tenant's own gate on each pod evicted another team's
  pods for pods it never let run).

What to do with the API (remove gates, record Events, evict) is returned, for the caller to do
outside the lock (`vgpu.extender.queues.release_loop`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from vgpu.api.podspec import key_of
from vgpu.api.queues.config import QUEUE_GATE, QueueConfig, queue_of
from vgpu.api.queues.namespaces import astray
from vgpu.api.queues.pods import Queued, capacity, counted, largest_gpu_mib, queued_pod
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import PodKey
from vgpu.core.queues.jobs import group, record_after
from vgpu.core.queues.proportion import ZERO, Vec, add, share, sub
from vgpu.core.queues.reclaim import Running, victims
from vgpu.core.queues.reclaim_asks import ReclaimAsks
from vgpu.core.queues.reclaim_nodes import victims_on_one_node
from vgpu.core.queues.release import Job, plan
from vgpu.extender.queues.cache_view import QueueParts
from vgpu.extender.queues.job_fits import JobFits, free_units, gpus_of, places_held

Obj = dict[str, Any]


class QueueIndex:
    """The queued pods of the watch (a second subscriber to its events, with a lock of its own)."""

    def __init__(self, parts: QueueParts) -> None:
        self.parts = parts
        """What the pass reads of the extender, the pods' parsing included."""
        self._lock = threading.Lock()
        self._pods: dict[str, Queued] = {}

    def apply(self, kind: str, obj: Obj) -> None:
        """One pod watch event; pods without the queue label, or unreadable, are not kept."""
        key = str(key_of(obj))
        found = None if kind == "DELETED" else self._read(obj)
        with self._lock:
            if found is None:
                self._pods.pop(key, None)
            else:
                self._pods[key] = found

    def replace_all(self, pods: Iterable[Obj]) -> None:
        """Rebuild from a fresh listing (a new leadership term)."""
        read = [q for q in map(self._read, pods) if q is not None]
        with self._lock:
            self._pods = {q.pod.key: q for q in read}

    def released(self, key: str) -> None:
        """Its gate is gone (the patch succeeded): count it released before the watch says so."""
        with self._lock:
            found = self._pods.get(key)
            if found is not None:
                self._pods[key] = replace(found, pod=replace(found.pod, gated=False), gates=())

    def snapshot(self) -> dict[str, Queued]:
        with self._lock:
            return dict(self._pods)

    def _read(self, obj: Obj) -> Queued | None:
        if queue_of(obj.get("metadata") or {}) is None:
            return None
        try:
            parsed = self.parts.cache.parse(obj)
            if parsed.scheduler not in self.parts.config.schedulers:
                return None  # another scheduler's pod: neither gated nor counted
            size = self.parts.gang_size(parsed) if parsed.gang else 1
        except InvalidRequest:
            return None  # the cache reports it (an Event and a metric)
        return queued_pod(obj, parsed, size)


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a queue stands after a pass (Events, metrics, `kubectl inspect vgpu --queues`)."""

    deserved: Vec
    allocated: Vec
    pending: Vec
    share: Fraction


@dataclass(frozen=True, slots=True)
class Decision:
    """A pass's outcome, to carry out outside the cache's lock."""

    release: tuple[Queued, ...] = ()
    waiting: Mapping[str, str] = field(default_factory=dict)
    standing: Mapping[str, Standing] = field(default_factory=dict)
    evict: tuple[Queued, ...] = ()
    held_since: Mapping[str, float] = field(default_factory=dict)
    decided: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """The record of gangs decided and still being released (`vgpu.extender.gangs.record`)."""
    evicted_for: str = ""
    """The job `evict` makes room for ("" when none): later passes try it first."""
    spent: Mapping[str, float] = field(default_factory=dict)
    """Strict queues cooling down after a spent hold (`release.Pass.spent`)."""


def decide(
    parts: QueueParts,
    index: QueueIndex,
    config: QueueConfig,
    *,
    now: float,
    held_since: Mapping[str, float],
    may_reclaim: bool,
    spare: frozenset[str] = frozenset(),
    asks: ReclaimAsks | None = None,
    decided: Mapping[str, frozenset[str]] | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    first: frozenset[str] = frozenset(),
    spent: Mapping[str, float] | None = None,
) -> Decision:
    """One pass (module doc): the plan, then reclaim's victims for the jobs it leaves waiting.
    `now` is wall time (strict holds, minimum runtimes); `spare`: pods reclaim must not pick
    (their evictions were refused lately); `asks`: the jobs resting after asks that found no
    victims, kept by the caller from pass to pass; `decided`: the leader's record of the gangs
    it decided (`vgpu.core.queues.jobs`); `namespace_labels`: each namespace's labels, for the
    queues bound by selector (`vgpu.api.queues.namespaces`); `first`: the jobs earlier passes
    evicted for, tried before any other (`release.plan`); `spent`: the strict queues cooling
    down after a spent hold, as the last pass left them (`release.Pass.spent`)."""
    recs, elsewhere = _counted(index.snapshot(), config, namespace_labels or {})
    cache = parts.cache
    with cache.atomic():  # the snapshot of capacity and places: O(nodes + pods), the lock's
        # only long hold
        gpus = [(g.healthy, g.memory_mib) for ns in cache.node_states.values() for g in ns.gpus]
        holds = places_held(cache, recs.values())
    unit_mib = parts.config.memory_unit_mib
    given = counted(recs.values(), largest_gpu_mib(gpus), unit_mib, holds)
    recs = {r.pod.key: r for r in given}
    planned = _plan(
        parts,
        capacity(gpus, unit_mib),
        recs,
        config,
        now=now,
        held_since=held_since,
        decided=decided or {},
        first=first,
        spent=spent or {},
    )
    waiting = {**elsewhere, **planned.decision.waiting}
    decision = replace(planned.decision, waiting=waiting)
    if not may_reclaim or any(r.deleting and not r.pod.gated for r in recs.values()):
        return decision  # no reclaim while earlier victims still exist
    candidates = {k: r for k, r in recs.items() if k not in spare}
    evicted_for, evict = _victims(
        parts, config, candidates, planned, now, ReclaimAsks() if asks is None else asks
    )
    return replace(decision, evict=evict, evicted_for=evicted_for)


@dataclass(frozen=True, slots=True)
class _Planned:
    """The plan of one pass, and what reclaim reads of it."""

    decision: Decision
    """Released, waiting, standing and the gang record (no evictions: reclaim's)."""
    fits: JobFits
    waiting: list[Job]
    """The jobs left waiting, reclaim's candidates."""
    held: Mapping[str, Vec]
    """What each queue holds after this pass's releases."""
    deserved: Mapping[str, Vec]
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Each job's pods (`vgpu.core.queues.jobs.Grouped.members`)."""


def _plan(
    parts: QueueParts,
    capacity: Vec,
    recs: Mapping[str, Queued],
    config: QueueConfig,
    *,
    now: float,
    held_since: Mapping[str, float],
    decided: Mapping[str, frozenset[str]],
    first: frozenset[str],
    spent: Mapping[str, float],
) -> _Planned:
    """Which jobs to release in fair order (`release.plan`), each placed whole and held."""
    live = [r.pod for r in recs.values() if not (r.deleting and r.pod.gated)]
    grouped = group(live, capacity, decided)
    fits = JobFits(parts, recs, grouped.members)
    outcome = plan(
        config.queues,
        grouped.book,
        grouped.jobs,
        fits,
        now=now,
        held_since=held_since,
        first=first,
        spent=spent,
    )
    keys = [*grouped.finishing]
    for job in outcome.released:
        keys += grouped.members[job]
    waiting = dict(grouped.waiting)
    for job, why in outcome.waiting.items():
        waiting.update(dict.fromkeys(grouped.members[job], why))
    held, pending = dict(grouped.book.by_queue), dict(grouped.pending)
    by_key = {j.key: j for j in grouped.jobs}
    for job in outcome.released:
        held[by_key[job].queue] = add(held.get(by_key[job].queue, ZERO), by_key[job].ask)
        pending[by_key[job].queue] = sub(pending.get(by_key[job].queue, ZERO), by_key[job].ask)
    names = sorted({s.name for s in config.queues})
    standing = {q: _standing(outcome.deserved, held, pending, q) for q in names}
    release = tuple(recs[k] for k in keys if k in recs)
    after = record_after(live, decided, outcome.released, grouped.members)
    decision = Decision(
        release, waiting, standing, (), dict(outcome.held_since), after, spent=dict(outcome.spent)
    )
    waiting_jobs = [by_key[j] for j in outcome.waiting if j in by_key]
    return _Planned(decision, fits, waiting_jobs, held, outcome.deserved, grouped.members)


def _standing(
    deserved: Mapping[str, Vec], held: Mapping[str, Vec], pending: Mapping[str, Vec], queue: str
) -> Standing:
    got = held.get(queue, ZERO)
    due = deserved.get(queue, ZERO)
    return Standing(due, got, pending.get(queue, ZERO), share(got, due))


def _counted(
    recs: Mapping[str, Queued], config: QueueConfig, labels: Mapping[str, Mapping[str, str]]
) -> tuple[dict[str, Queued], dict[str, str]]:
    """The pods whose label names their namespace's queue, and why each other held pod waits
    (`vgpu.api.queues.namespaces.astray`)."""
    counted: dict[str, Queued] = {}
    held: dict[str, str] = {}
    for key, r in recs.items():
        ns = r.pod.namespace
        why = astray(config.bindings, ns, labels.get(ns, {}), r.pod.queue)
        if why is None:
            counted[key] = r
        elif r.pod.gated:
            held[key] = why
    return counted, held


def _victims(
    parts: QueueParts,
    config: QueueConfig,
    recs: Mapping[str, Queued],
    planned: _Planned,
    now: float,
    asks: ReclaimAsks,
) -> tuple[str, tuple[Queued, ...]]:
    """The first waiting job reclaim lets in and the pods to evict for it (at most one job per
    pass; "" and none when no job); the jobs asked are `asks`' choice, and one whose ask finds
    no victims rests."""
    jobs, fits, held, due = planned.waiting, planned.fits, planned.held, planned.deserved
    running = [
        Running(r.pod.key, r.pod.queue, r.pod.ask, r.started, r.node, gpus_of(parts, r.pod.key))
        for r in recs.values()
        if not r.pod.gated and r.node and not r.deleting
    ]

    def fits_without(job: Job, gone: Iterable[Running]) -> bool:
        with parts.cache.without([PodKey(g.key) for g in gone]):
            return fits.whole(job)

    asks.forget_rested(now)
    schedulable = [j for j in jobs if not _gated_otherwise(recs, planned.members.get(j.key, ()))]
    ordered = sorted(schedulable, key=lambda j: (-j.priority, j.created, j.key))
    for job in asks.choose(ordered, per_queue=config.reclaim_per_pass, now=now):
        allowed = fits.job_nodes(job)  # evict only where the job may run
        here = running if allowed is None else [r for r in running if r.node in allowed]
        given = (job, config.queues, held, due, here, fits_without)
        limit = config.min_runtime_s
        if fits.pods(job) == 1:  # a one-pod job runs on one node: its victims are all there
            chosen = victims_on_one_node(
                *given, now=now, min_runtime_s=limit, free=free_units(parts)
            )
        else:
            chosen = victims(*given, now=now, min_runtime_s=limit)
        if chosen:
            return job.key, tuple(recs[v.key] for v in chosen)
        asks.found_none(job.key, now)
    return "", ()


def _gated_otherwise(recs: Mapping[str, Queued], keys: Iterable[str]) -> bool:
    """Whether a pod of `keys` has a scheduling gate besides the queue's (module doc)."""
    return any(g != QUEUE_GATE for k in keys if k in recs for g in recs[k].gates)


def reason_line(why: str, queue: str, standing: Standing | None) -> str:
    """An Event's message: why the pod waits and where its queue stands."""
    if standing is None:
        return why
    d, a, p = standing.deserved, standing.allocated, standing.pending
    return (
        f"{why}; queue {queue} holds {a[0]} cores / {a[1]} memory units of {d[0]} / {d[1]} "
        f"deserved (share {float(standing.share):.2f}), {p[0]} cores / {p[1]} units pending"
    )
