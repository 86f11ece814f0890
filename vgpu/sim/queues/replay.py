"""A queued replay in time: pods arrive, wait, are released by `release.plan`, run, and leave.

Time moves in ticks (`tick_s`). In each tick, pods that finish give their GPUs back, pods that arrive
join their queue, then one release pass runs, as the extender's leader would:

* **queues**: `release.plan` over each queue's oldest `window` pods whose shape may fit now
  (`vgpu.sim.offers`; the rest of a queue counts as its backlog), with `fits` placing the pod
  where the replay's `Scheduler.select` would (asked through `BestNodes`, which re-evaluates only
  the nodes changed since) and holding that place in the ledger; then, for queues with reclaim,
  up to `RECLAIMS` waiting pods per queue, chosen by `reclaim_asks` (queue order, past pods whose
  ask found no victims lately), ask `reclaim_nodes.victims_on_one_node` (every pod runs on one
  node), whose what-if (`Evictions`) evicts on forks of the cluster state that are always
  reverted. Victims go back to their queue (keeping their arrival time) and their run so far is
  lost GPU time;
* **FCFS** (no queues): the oldest `window` pods that may fit, of one global arrival order, each
  placed if it fits (kube-scheduler's behaviour without queues: later pods pass a head that does
  not fit).

A shape that found no place in a pass is not tried again in that pass: a pass only fills GPUs, so a
shape that does not fit stays unfit until the next tick.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from random import Random

from vgpu.core.changes import ChangeFeed
from vgpu.core.ids import NodeName, PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import Node
from vgpu.core.policy.interface import Policy
from vgpu.core.queues import whole_gpus
from vgpu.core.queues.proportion import ZERO, Vec, deserved, overused
from vgpu.core.queues.reclaim import Running
from vgpu.core.queues.reclaim_asks import ReclaimAsks
from vgpu.core.queues.reclaim_nodes import victims_on_one_node
from vgpu.core.queues.release import Book, Job, plan
from vgpu.core.queues.whole_gpus import NO_KEEP, Keep
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState
from vgpu.core.units import memory_units_given, memory_units_held, mib_to_mmib
from vgpu.sim.best_nodes import BestNodes
from vgpu.sim.evictions import Evictions
from vgpu.sim.fairness import Left, Sample, Tallies
from vgpu.sim.offers import Offers
from vgpu.sim.poisson import MEMORY_UNIT_MIB, Arrival
from vgpu.sim.queues.settings import QueueSetup

RECLAIMS = 8
"""Waiting pods per queue and pass that may ask for reclaim."""
SAMPLE_S = 60.0


@dataclass(slots=True)
class _Run:
    arrival: Arrival
    started: float
    incarnation: int
    memory: int
    """The memory units its place holds (`_held_units`), what its queue counts while it runs."""


@dataclass(slots=True)
class QueuedReplay:
    """The cluster, the queues' pending pods and the running ones, advanced tick by tick."""

    nodes: tuple[Node, ...]
    policy: Policy
    setup: QueueSetup
    seed: int
    tallies: Tallies = field(init=False)
    state: ClusterState = field(init=False)
    ledger: Ledger = field(init=False)
    scheduler: Scheduler = field(init=False)
    best: BestNodes = field(init=False)
    """`scheduler.select` over every node, at the cost of the nodes changed since last asked."""
    pending: dict[str, list[Arrival]] = field(init=False)
    running: dict[str, _Run] = field(init=False, default_factory=dict)
    jobs: dict[str, Running] = field(init=False, default_factory=dict)
    """The running pods as reclaim sees them, kept beside `running` rather than rebuilt per ask."""
    ends: list[tuple[float, str, int]] = field(init=False, default_factory=list)
    held: dict[str, int] = field(init=False)
    asked: dict[str, int] = field(init=False)
    """Cores the pending pods of each queue ask."""
    held_memory: dict[str, int] = field(init=False)
    """Memory units (`MEMORY_UNIT_MIB` each) the running pods of each queue hold, as the
    extender counts them (`_held_units`): what each one's place holds on its own GPUs, a pod
    asking cores only its cores' part."""
    asked_memory: dict[str, int] = field(init=False)
    memory_units: int = field(init=False)
    """The cluster's GPU memory in units."""
    largest_mib: int = field(init=False)
    """The largest GPU's memory: what a waiting pod is counted as given (`_given`)."""
    holds: dict[str, float] = field(init=False, default_factory=dict)
    spent: dict[str, float] = field(init=False, default_factory=dict)
    """Strict queues cooling down after a spent hold (`release.Pass.spent`)."""
    due: dict[str, Vec] = field(init=False, default_factory=dict)
    unfit: set[object] = field(init=False, default_factory=set)
    """Pod shapes that fit nowhere at the end of the last pass."""
    freed: set[NodeName] = field(init=False, default_factory=set)
    """Nodes where pods left (or were evicted) since the last pass."""
    asks: ReclaimAsks = field(init=False, default_factory=ReclaimAsks)

    def __post_init__(self) -> None:
        feed = ChangeFeed()
        self.state = ClusterState(self.nodes, feed=feed)
        self.ledger = Ledger(self.state)
        self.scheduler = Scheduler(self.state, self.policy, rng=Random(self.seed))
        self.best = BestNodes(self.scheduler, feed)
        names = self.setup.names
        self.pending = {n: [] for n in names}
        self.held = dict.fromkeys(names, 0)
        self.asked = dict.fromkeys(names, 0)
        self.memory_units = sum(g.memory_mib // MEMORY_UNIT_MIB for n in self.nodes for g in n.gpus)
        self.largest_mib = max((g.memory_mib for n in self.nodes for g in n.gpus), default=0)
        self.held_memory = dict.fromkeys(names, 0)
        self.asked_memory = dict.fromkeys(names, 0)
        self.tallies = Tallies(names, sum(len(n.gpus) for n in self.nodes) * 100)

    @property
    def capacity(self) -> Vec:
        """The cluster's cores and memory units (what the memory pods are given counts
        against, trace pods' in proportion to their cores included)."""
        return (self.tallies.capacity, self.memory_units)

    def _given(self, arrival: Arrival) -> Arrival:
        """The arrival counting the memory units its pod is given, as the extender counts a pod
        not yet placed (`vgpu.core.queues.jobs.given_memory`: on the largest GPU, a share
        asking cores only its cores' part, a whole GPU all of it), not only what it asks
        explicitly. Once placed it counts what it holds instead (`_held_units`)."""
        memory = sum(
            memory_units_given(c.cores, c.memory_mib, self.largest_mib, MEMORY_UNIT_MIB)
            for c in arrival.pod.gpu_containers
        )
        return replace(arrival, memory=memory)

    def _held_units(self, key: PodKey) -> int:
        """The memory units the pod's place holds on its own GPUs, as the extender counts a
        placed pod (`vgpu.core.queues.jobs.held_memory`)."""
        holding = self.ledger.holding(key)
        if holding is None:
            return 0  # pragma: no cover - a pod starts only where its place is held
        return sum(
            memory_units_held(s.cores, s.memory_mmib, MEMORY_UNIT_MIB)
            for s in holding.assignment.charged
        )

    def _holds(self, queue: str) -> Vec:
        return (self.held[queue], self.held_memory[queue])

    def run(
        self, arrivals: Sequence[Arrival], progress: Callable[[float], None] | None = None
    ) -> Tallies:
        """Replay `arrivals` (in time order) until the setup's end; the figures. `progress` is
        told the simulated time at each sample (a full-cluster run takes minutes)."""
        arrivals = [self._given(a) for a in arrivals]
        i, now, next_sample = 0, 0.0, 0.0
        while now < self.setup.end_s:
            now += self.setup.tick_s
            self._finish(now)
            while i < len(arrivals) and arrivals[i].at <= now:
                self._wait(arrivals[i])
                i += 1
            if self.tallies.left is None and now >= self.setup.last_start_s:
                self._note_left(now)
            if self.setup.fcfs:
                self._fcfs_pass(now)
            else:
                self._queue_pass(now)
            if now >= next_sample:
                self._sample(now)
                next_sample += SAMPLE_S
                if progress is not None:
                    progress(now)
        for queue in self.pending.values():
            for a in queue:
                self.tallies.censored(a.queue, now - a.at)
        return self.tallies

    def _finish(self, now: float) -> None:
        while self.ends and self.ends[0][0] <= now:
            _, key, incarnation = heapq.heappop(self.ends)
            run = self.running.get(key)
            if run is not None and run.incarnation == incarnation:
                self._stop(key)

    def _note_left(self, now: float) -> None:
        """What each queue holds as the last queue starts, and how long each pod has left."""
        left: dict[str, list[Left]] = {q: [] for q in self.setup.names}
        for run in self.running.values():
            a = run.arrival
            left[a.queue].append(Left(a.cores, run.started + a.duration - now))
        self.tallies.left = left

    def _wait(self, arrival: Arrival) -> None:
        insort(self.pending[arrival.queue], arrival, key=lambda a: (a.at, a.pod.key))
        self.asked[arrival.queue] += arrival.cores
        self.asked_memory[arrival.queue] += arrival.memory

    def _stop(self, key: str) -> _Run:
        run = self.running.pop(key)
        del self.jobs[key]
        released = self.ledger.release(run.arrival.pod.key)
        if released is not None:
            self.freed.add(released.node)
        self.held[run.arrival.queue] -= run.arrival.cores
        self.held_memory[run.arrival.queue] -= run.memory
        return run

    def _start(self, arrival: Arrival, now: float) -> None:
        key = arrival.pod.key
        incarnation = self.tallies.started(arrival.queue, now - arrival.at, key)
        memory = self._held_units(key)
        self.running[key] = _Run(arrival, now, incarnation, memory)
        holding = self.ledger.holding(key)
        node = "" if holding is None else str(holding.assignment.node)
        gpus = (
            ()
            if holding is None
            else tuple(sorted({str(s.uuid) for s in holding.assignment.shares}))
        )
        ask = (arrival.cores, memory)
        self.jobs[key] = Running(key, arrival.queue, ask, now, node, gpus)
        self.held[arrival.queue] += arrival.cores
        self.held_memory[arrival.queue] += memory
        heapq.heappush(self.ends, (now + arrival.duration, key, incarnation))

    def _place(self, arrival: Arrival, unfit: set[object], keep: Keep = NO_KEEP) -> bool:
        """Place the pod through the scheduler and hold its place, or note its shape unfit;
        while `keep` names a queue waiting for whole GPUs, a small pod goes to a hole first
        (`whole_gpus.select`, the extender's placement too)."""
        if arrival.shape in unfit:
            return False
        selection = whole_gpus.select(
            self.scheduler, arrival.pod, keep, self.best.select, in_holes=self.best.in_holes
        )
        if selection is None:
            unfit.add(arrival.shape)
            return False
        self.ledger.confirm(selection.assignment)
        return True

    def _offers(self) -> Offers:
        return Offers(self.scheduler, self.unfit, self.freed, self.setup.window)

    def _fcfs_pass(self, now: float) -> None:
        offers = self._offers()
        merged = heapq.merge(*offers.per_queue(self.pending).values(), key=_age)
        unfit = offers.unfit()
        started: set[str] = set()
        for a in islice(merged, self.setup.window):
            if self._place(a, unfit):
                self._start(a, now)
                started.add(a.pod.key)
        self.unfit, self.freed = unfit, set()
        self._drop(started)
        self.due = deserved(self.capacity, self.setup.specs, self._requests())

    def _requests(self) -> dict[str, Vec]:
        return {
            q: (self.held[q] + self.asked[q], self.held_memory[q] + self.asked_memory[q])
            for q in self.setup.names
        }

    def _drop(self, started: set[str]) -> None:
        """Take started pods off their queues."""
        if not started:
            return
        for q, queue in self.pending.items():
            gone = [a for a in queue if a.pod.key in started]
            if gone:
                self.asked[q] -= sum(a.cores for a in gone)
                self.asked_memory[q] -= sum(a.memory for a in gone)
                self.pending[q] = [a for a in queue if a.pod.key not in started]

    def _queue_pass(self, now: float) -> None:
        offered: dict[str, Arrival] = {}
        backlog: dict[str, Vec] = {}
        offers = self._offers()
        for q, head in offers.per_queue(self.pending).items():
            offered.update((a.pod.key, a) for a in head)
            backlog[q] = (
                self.asked[q] - sum(a.cores for a in head),
                self.asked_memory[q] - sum(a.memory for a in head),
            )
        unfit = offers.unfit()
        jobs = [
            Job(k, a.queue, a.queue, (a.cores, a.memory), created=a.at, whole=a.whole)
            for k, a in offered.items()
        ]
        held = {q: self._holds(q) for q in self.setup.names}
        book = Book(self.capacity, held, held, backlog)
        out = plan(
            self.setup.specs,
            book,
            jobs,
            lambda j, keep: self._place(offered[j.key], unfit, keep),
            now=now,
            held_since=self.holds,
            spent=self.spent,
        )
        self.unfit, self.freed = unfit, set()
        self.holds, self.spent = dict(out.held_since), dict(out.spent)
        self.due = dict(out.deserved)
        for key in out.released:
            self._start(offered[key], now)
        self._drop(set(out.released))
        if any(s.reclaim for s in self.setup.specs):
            self._reclaim(now)

    def _reclaim(self, now: float) -> None:
        """Reclaim for the pods `reclaim_asks` chooses; a shape whose ask found no victims is
        not asked again in this pass (the same state would answer the same)."""
        self.asks.forget_rested(now)
        tried: set[object] = set()
        for spec in self.setup.specs:
            offered = {str(a.pod.key): a for a in self.pending[spec.name][: self.setup.window]}
            jobs = (_job(a) for a in offered.values() if a.shape not in tried)
            for job in self.asks.choose(jobs, per_queue=RECLAIMS, now=now):
                if overused(self._holds(spec.name), self.due.get(spec.name, ZERO)):
                    break
                arrival = offered[job.key]
                if arrival.shape in tried:
                    continue  # a resting pod, offered before its shape was tried this pass
                tried.add(arrival.shape)
                if self._reclaim_for(arrival, job, now):
                    tried.discard(arrival.shape)
                else:
                    self.asks.found_none(job.key, now)

    def _reclaim_for(self, arrival: Arrival, job: Job, now: float) -> bool:
        running = list(self.jobs.values())
        held = {q: self._holds(q) for q in self.setup.names}
        with Evictions(self.ledger, self.scheduler) as what_if:
            chosen = victims_on_one_node(
                job,
                self.setup.specs,
                held,
                self.due,
                running,
                lambda _j, vs: what_if.fits(arrival.pod, [PodKey(v.key) for v in vs]),
                now=now,
                min_runtime_s=self.setup.min_runtime_s,
                free=self._free,
            )
        if chosen is None:
            return False
        for v in chosen:
            run = self._stop(v.key)
            self.tallies.evicted(v.queue, run.arrival.cores * (now - run.started))
            self._wait(run.arrival)
        if not self._place(arrival, set()):
            return False  # pragma: no cover - the what-if just placed it on this very state
        self._start(arrival, now)
        self.pending[arrival.queue].remove(arrival)
        self.asked[arrival.queue] -= arrival.cores
        self.asked_memory[arrival.queue] -= arrival.memory
        return True

    def _free(self, node: str) -> Vec:
        """The cores and memory units free on a node now (reclaim's candidate nodes: free plus
        what may be freed)."""
        ns = self.state.node(NodeName(node))
        unit = mib_to_mmib(MEMORY_UNIT_MIB)
        return (sum(ns.free_cores), sum(m // unit for m in ns.free_mem))

    def _sample(self, now: float) -> None:
        due = self.due or deserved(self.capacity, self.setup.specs, self._requests())
        self.tallies.samples.append(Sample(now, dict(self.held), {q: v[0] for q, v in due.items()}))


def _job(arrival: Arrival) -> Job:
    """A waiting pod as reclaim sees it (the queue stands for its namespace)."""
    ask = (arrival.cores, arrival.memory)
    return Job(arrival.pod.key, arrival.queue, arrival.queue, ask, created=0)


def _age(arrival: Arrival) -> tuple[float, str]:
    """A queue's order: arrival time, then the pod's key."""
    return (arrival.at, str(arrival.pod.key))
