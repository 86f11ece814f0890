"""The extender leader's release loop: held pods let go in fair order, through the API.

Every `intervalSeconds` (the queue ConfigMap), on the replica that may bind (the leader, its cache
resynced for its term), one pass (`vgpu.extender.queues.release_pass.decide`), then outside the
cache's lock:

* each released pod loses the gate `vgpu.io/queue` in one JSON patch that tests the gate list and
  the UID first. Removing a gate that is gone is not possible, and a new leader rebuilds its view
  from a fresh listing, so failover releases nothing twice. A gang's gates are removed only once
  the Lease this leader last wrote records the gang's decision (`vgpu.extender.gangs.record`), so
  a gang cut short by a failover is finished by the next leader from that record, exactly the
  members it names (`vgpu.core.queues.jobs`); without a Lease the record is kept in memory;
* reclaim's victims are evicted through the Eviction API, so PodDisruptionBudgets hold (a budget
  that allows no disruption now answers 429 and nothing is deleted). The job they were evicted
  for is tried before every other job in the passes that follow, until it is released or
  `RECLAIMED_FOR_S` passes, so what they free goes to it (`release.plan`'s `first`); that job is
  carried on the leader Lease, as strict holds are, so a new leader tries it first too. A victim
  set is evicted whole or not at all: each victim is asked first with a dry run, and if any is
  refused none is evicted (the others alone would free nothing the waiting job can use) and the
  refused pods are spared by reclaim for `REFUSED_S`, so later passes pick other victims;
* each held pod gets an Event (`VgpuQueued`) when why it waits changes, saying where its queue
  stands; at most `EVENTS_PER_PASS` per pass, the rest on later passes.

The configuration is read from the ConfigMap every pass; a malformed one is logged once (one line
naming the field) and the last good one is kept; with none, nothing is released (pods stay held:
fail closed). A pod counts only in its namespace's queue (`vgpu.api.queues.namespaces`); when a
queue is bound by label the namespaces are listed each pass, and until one listing succeeds
nothing is released. Strict holds are kept across passes and handed to the next leader on the
leader Lease (`vgpu.extender.queues.strict_holds`). Each pass also carries on the Lease the
configuration in force and who acts on it (`vgpu.api.queues.in_force`), and a refused ConfigMap
fixed again is logged, so an operator sees both from outside.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from vgpu.adapters.kube.calls import KubeApi, KubeError, KubeNotFound
from vgpu.api.queues.config import CONFIG_KEY, QUEUE_GATE, QueueConfig, read_config
from vgpu.api.queues.in_force import IN_FORCE_ANNOTATION, QUEUED_EVENT, encode_in_force
from vgpu.api.queues.pods import Queued
from vgpu.core.errors import ConfigError
from vgpu.core.queues.reclaim_asks import ReclaimAsks
from vgpu.extender.gangs import record as gang_record
from vgpu.extender.queues import strict_holds
from vgpu.extender.queues.collector import QueueFigures
from vgpu.extender.queues.release_pass import Decision, QueueIndex, Standing, decide, reason_line
from vgpu.extender.queues.strict_holds import LeaseNotes

log = logging.getLogger(__name__)
EVENTS_PER_PASS = 20
REFUSED_S = 60.0
"""Seconds reclaim spares a pod whose eviction a PodDisruptionBudget refused."""
RECLAIMED_FOR_S = 300.0
"""Seconds a job reclaim evicted for is tried first in every pass, unless released sooner
(its victims' grace periods and the passes until the freed GPUs show)."""
REASON = QUEUED_EVENT


class QueueReleaser:
    """The loop (module doc); `pass_once` is one pass, for tests."""

    def __init__(
        self,
        api: KubeApi,
        index: QueueIndex,
        *,
        namespace: str,
        config_map: str,
        may_act: Callable[[], str | None],
        wall: Callable[[], float] = time.time,
        notes: LeaseNotes | None = None,
        holder: str = "",
    ) -> None:
        self.api, self.index = api, index
        self._where = (namespace, config_map)
        self._may_act = may_act
        self._wall = wall
        self._config: QueueConfig | None = None
        self._config_problem: str | None = None
        self._held_since: Mapping[str, float] = {}
        self._spent: Mapping[str, float] = {}
        """Strict queues cooling down after a spent hold (`release.Pass.spent`)."""
        self._namespaces: Mapping[str, Mapping[str, str]] | None = None
        """Each namespace's labels as last listed (queues bound by label)."""
        self._decided: Mapping[str, frozenset[str]] = {}
        """The gangs decided and still being released (`vgpu.extender.gangs.record`)."""
        self._notes = notes
        self._holder = holder
        """This replica's identity, carried with the configuration in force."""
        self._in_force = "{}"
        """The `queues.json` text of `_config`."""
        self._asks = ReclaimAsks()
        """Waiting jobs resting after a reclaim ask that found no victims."""
        self._new_term = True
        """The next pass is this replica's first as leader: it reads the holds handed on."""
        self._told: dict[str, str] = {}
        self._refused: dict[str, float] = {}
        """Pod key -> wall time its eviction was refused (spared by reclaim for REFUSED_S)."""
        self._reclaimed_for: dict[str, float] = {}
        """Job key -> wall time reclaim evicted for it: tried first for RECLAIMED_FOR_S."""
        self.last: Decision = Decision()
        self.released_total = 0
        self.evicted_total = 0

    def figures(self) -> QueueFigures:
        """The last pass's standing and the counts, for metrics.

        Only the leader's standing is current: a replica that stopped leading exports none, so a
        dashboard summing the series over replicas never counts a queue twice or shows a stale one.
        """
        standing = self.last.standing if self._may_act() is None else {}
        return QueueFigures(standing, self.released_total, self.evicted_total)

    def run(self, stop: threading.Event, beat: Callable[[], None]) -> None:
        """Pass after pass until `stop`; a failed pass is logged, never the end of the loop."""
        while not stop.wait(self._config.interval_s if self._config else 2.0):
            beat()
            if self._may_act() is not None:
                self._told.clear()  # a follower: a new term tells every held pod again
                self._new_term = True
                continue
            try:
                self.pass_once()
            except Exception:
                log.exception("queue release pass failed")

    def pass_once(self) -> Decision:
        """Read the configuration, decide, then remove gates, evict and tell."""
        config = self._read_config()
        labels = self._namespace_labels(config) if config is not None else None
        if config is None or labels is None:
            return self.last
        now = self._wall()
        self._refused = {k: t for k, t in self._refused.items() if now - t < REFUSED_S}
        if self._new_term and self._notes is not None:
            self._read_notes(self._notes, now)
        self._new_term = False
        carried = dict(self._reclaimed_for)
        self._reclaimed_for = {k: t for k, t in carried.items() if now - t < RECLAIMED_FOR_S}
        decision = decide(
            self.index.parts,
            self.index,
            config,
            now=now,
            held_since=self._held_since,
            may_reclaim=any(q.reclaim for q in config.queues),
            spare=frozenset(self._refused),
            asks=self._asks,
            decided=self._decided,
            namespace_labels=labels,
            first=frozenset(self._reclaimed_for),
            spent=self._spent,
        )
        if self._notes is not None and decision.held_since != self._held_since:
            self._notes.carry(
                strict_holds.HOLDS_ANNOTATION, strict_holds.encode(decision.held_since)
            )
        self._held_since = decision.held_since
        if self._notes is not None and decision.spent != self._spent:
            self._notes.carry(strict_holds.SPENT_ANNOTATION, strict_holds.encode(decision.spent))
        self._spent = decision.spent
        proven = self._carry_gangs(decision.decided)
        for queued in decision.release:
            if queued.pod.gang is None or queued.pod.ident in proven.get(queued.pod.gang, ()):
                self._release(queued)
        self._forget_released(decision.release)
        if self._reclaim(decision.evict, now):
            self._reclaimed_for[decision.evicted_for] = now
        if self._notes is not None and self._reclaimed_for != carried:
            text = strict_holds.encode(self._reclaimed_for)
            self._notes.carry(strict_holds.RECLAIMED_ANNOTATION, text)
        self._tell(decision.waiting, decision.standing)
        self.last = decision
        return decision

    def _read_notes(self, notes: LeaseNotes, now: float) -> None:
        """A new term: what the last leader carried on the Lease (strict holds and cooldowns, the gang record,
        the jobs reclaim evicted for)."""
        self._held_since = strict_holds.decode(
            notes.annotation(strict_holds.HOLDS_ANNOTATION), now=now
        )
        self._spent = strict_holds.decode_spent(
            notes.annotation(strict_holds.SPENT_ANNOTATION), now=now
        )
        self._decided = gang_record.decode(notes.annotation(gang_record.GANGS_ANNOTATION))
        self._reclaimed_for = strict_holds.decode_times(
            notes.annotation(strict_holds.RECLAIMED_ANNOTATION),
            strict_holds.RECLAIMED_ANNOTATION,
            now=now,
            dropped="the jobs reclaim evicted for wait in fair order",
        )

    def _namespace_labels(self, config: QueueConfig) -> Mapping[str, Mapping[str, str]] | None:
        """Each namespace's labels when a queue is bound by label ({} otherwise); the last
        listing if this one fails, None (no pass: nothing released) if none ever succeeded."""
        if not any(b.labels for b in config.bindings):
            return {}
        try:
            items = self.api.list_namespaces().items
        except KubeError as err:
            log.warning("cannot list namespaces for the queues bound by label: %s", err)
            return self._namespaces
        self._namespaces = {
            str(meta.get("name")): {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
            for meta in (ns.get("metadata") or {} for ns in items)
        }
        return self._namespaces

    def _carry_gangs(self, decided: Mapping[str, frozenset[str]]) -> Mapping[str, frozenset[str]]:
        """Carry the gang record on the Lease; the gangs whose gates may be removed now: those
        the Lease as last written records (all of them without a Lease)."""
        if decided != self._decided and self._notes is not None:
            self._notes.carry(gang_record.GANGS_ANNOTATION, gang_record.encode(decided))
        self._decided = decided
        if self._notes is None:
            return decided
        return gang_record.decode(self._notes.annotation(gang_record.GANGS_ANNOTATION))

    def _read_config(self) -> QueueConfig | None:
        namespace, name = self._where
        text = "{}"
        try:
            data = self.api.get_config_map(namespace, name).get("data") or {}
            text = str(data.get(CONFIG_KEY) or "{}")
            config = read_config(text)
        except KubeNotFound:
            config = QueueConfig()
        except KubeError as err:
            log.warning("cannot read queue configuration %s/%s: %s", namespace, name, err)
            return self._told_in_force(self._config)
        except ConfigError as err:
            if str(err) != self._config_problem:
                log.error(
                    "ConfigMap %s/%s: %s (keeping the last good queues)", namespace, name, err
                )
                self._config_problem = str(err)
            return self._told_in_force(self._config)
        if self._config_problem is not None:
            log.info("ConfigMap %s/%s is readable again: its queues are in force", namespace, name)
        self._config_problem = None
        self._config, self._in_force = config, text
        return self._told_in_force(config)

    def _told_in_force(self, config: QueueConfig | None) -> QueueConfig | None:
        """Carry the configuration in force on the Lease (none yet: nothing is carried)."""
        if config is not None and self._notes is not None:
            self._notes.carry(IN_FORCE_ANNOTATION, encode_in_force(self._holder, self._in_force))
        return config

    def _release(self, queued: Queued) -> None:
        namespace, name = queued.pod.key.split("/", 1)
        try:
            self.api.remove_scheduling_gate(
                namespace, name, list(queued.gates), QUEUE_GATE, uid=queued.uid
            )
        except KubeError as err:  # changed or gone since the watch showed it: next pass decides
            log.info("pod %s keeps its queue gate this pass: %s", queued.pod.key, err)
            return
        self.index.released(queued.pod.key)
        self._told.pop(queued.pod.key, None)
        self.released_total += 1
        log.info("released pod %s of queue %s", queued.pod.key, queued.pod.queue)

    def _reclaim(self, victims: tuple[Queued, ...], now: float) -> bool:
        """Evict the victim set whole, or none of it (module doc); whether it was evicted."""
        if not victims:
            return False
        refused = [v for v in victims if not self._evict(v, dry_run=True)]
        if refused:
            for victim in refused:
                self._refused[victim.pod.key] = now
            return False
        for victim in victims:
            self._evict(victim)
        return True

    def _forget_released(self, released: tuple[Queued, ...]) -> None:
        """A job reclaim evicted for is tried first no more once it is released."""
        done = {q.pod.key for q in released}
        done |= {f"gang:{q.pod.gang}" for q in released if q.pod.gang is not None}
        for key in done & self._reclaimed_for.keys():
            del self._reclaimed_for[key]

    def _evict(self, victim: Queued, *, dry_run: bool = False) -> bool:
        namespace, name = victim.pod.key.split("/", 1)
        try:
            self.api.evict_pod(namespace, name, uid=victim.uid, dry_run=dry_run)
        except KubeError as err:  # a PodDisruptionBudget (429) or a pod already gone
            log.info("reclaim: pod %s not evicted: %s", victim.pod.key, err)
            return False
        if not dry_run:
            self.evicted_total += 1
            log.info("reclaim: evicted pod %s of queue %s", victim.pod.key, victim.pod.queue)
        return True

    def _tell(self, waiting: Mapping[str, str], standing: Mapping[str, Standing]) -> None:
        for key in [k for k in self._told if k not in waiting]:
            del self._told[key]
        recs = self.index.snapshot()
        sent = 0
        for key, why in sorted(waiting.items()):
            if self._told.get(key) == why or key not in recs or sent >= EVENTS_PER_PASS:
                continue
            queued = recs[key]
            namespace, name = key.split("/", 1)
            involved = {
                "kind": "Pod",
                "metadata": {"namespace": namespace, "name": name, "uid": queued.uid},
            }
            message = reason_line(why, queued.pod.queue, standing.get(queued.pod.queue))
            try:
                self.api.create_event(
                    involved, reason=REASON, message=message, component="vgpu-extender"
                )
            except KubeError as err:
                log.warning("cannot record event %s for %s: %s", REASON, key, err)
                continue
            self._told[key] = why
            sent += 1
