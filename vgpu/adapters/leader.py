"""Lease-based leader election (coordination.k8s.io/v1), with injectable clocks.

Semantics follow client-go's elector:

- A candidate takes a Lease held by someone else only after *its own* monotonic clock has seen
  the record unchanged for `leaseDurationSeconds`, measured from when it observed the last
  change, never from the `renewTime` written by a possibly skewed peer.
- Every write is a PUT carrying the resourceVersion that was read, so of two racing candidates
  exactly one wins; the other gets 409 and stays a follower.
- The leader renews every `retry_period`; if it cannot renew for `renew_deadline` it stops
  leading locally, before its lease can expire in anyone else's view (renew_deadline < duration).
- `leaseTransitions` is incremented whenever the holder changes. `term` is a local counter that
  grows each time this process gains leadership: callers tag caches with it and treat a
  different term (or `is_leader == False`) as "rebuild before acting".

MicroTime values are written with exactly six fraction digits (the API server rejects others).

The leader may *carry* annotations on the Lease (`carry`): written with each renewal, read by the
next leader from the record it took over (`annotation`), so what a term must hand on (the queues'
strict holds) survives a failover. Only the Lease's writers (vgpu's service account) can set them.
A candidate taking the Lease over writes back what it found, never notes from an older term of its
own, so it cannot overwrite its predecessor's before reading them.
Properties may be read from other threads; ticks must come from one thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from vgpu.adapters.kube.calls import KubeConflict, KubeError, KubeNotFound, microtime
from vgpu.adapters.streak import Streak
from vgpu.core.errors import VgpuError

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class LeaderConfigError(VgpuError, ValueError):
    """Leader-election settings that cannot work; the message names them and the rule."""


class LeaseClient(Protocol):
    """The three Lease calls the elector needs (`KubeApi` provides them)."""

    def get_lease(self, namespace: str, name: str) -> Obj: ...
    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> Obj: ...
    def replace_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> Obj: ...


@dataclass(frozen=True, slots=True)
class LeaderConfig:
    namespace: str
    name: str
    identity: str  # unique per process, e.g. the pod name
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.identity:
            raise LeaderConfigError("leader election: identity must be set (use the pod name)")
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise LeaderConfigError(
                "leader election: need 0 < retry_period < renew_deadline < lease_duration, got "
                f"{self.retry_period} / {self.renew_deadline} / {self.lease_duration} seconds"
            )


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """One candidate. Call `try_acquire_or_renew()` every `retry_period`, or use `run()`."""

    def __init__(
        self,
        client: LeaseClient,
        config: LeaderConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._client, self._config = client, config
        self._clock, self._wall = clock, wall_clock
        self._leader = False
        self._term = 0
        self._record: Obj | None = None
        self._observed_version = ""
        self._observed_at = 0.0
        self._renewed_at = 0.0
        self._followed = ""  # the other holder last announced, so that is said once
        self._carried: dict[str, str | None] = {}
        self._carried_lock = threading.Lock()
        self._trouble = Streak(log, f"leader election: lease {config.namespace}/{config.name}")

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def term(self) -> int:
        """How many times this elector has gained leadership (0: never)."""
        return self._term

    @property
    def holder(self) -> str:
        """The holder in the last record seen ("" when none or released)."""
        return str(self._spec().get("holderIdentity") or "")

    @property
    def lease_transitions(self) -> int:
        return int(self._spec().get("leaseTransitions") or 0)

    def annotation(self, key: str) -> str | None:
        """An annotation of the Lease as last read or written (None: absent)."""
        found = ((self._record or {}).get("metadata") or {}).get("annotations") or {}
        value = found.get(key)
        return value if isinstance(value, str) else None

    def carry(self, key: str, value: str | None) -> None:
        """Write annotation `key` (None: remove it) with each renewal while this term lasts
        (module doc). Any thread may call it."""
        with self._carried_lock:
            self._carried[key] = value

    def try_acquire_or_renew(self) -> bool:
        """One election step; returns whether this candidate leads afterwards."""
        now = self._clock()
        cfg = self._config
        try:
            record = self._client.get_lease(cfg.namespace, cfg.name)
        except KubeNotFound:
            return self._create(now)
        except KubeError as e:
            self._trouble.failed(f"reading failed: {e}")
            return self._check_deadline(now)
        self._observe(record, now)
        holder = self.holder
        if holder and holder != cfg.identity and not self._expired(now):
            self._lose(f"lease is held by {holder}")
            self._follow(holder)
            self._trouble.succeeded()  # a follower's round ends here: its read worked
            return False
        return self._write(record, holder, now)

    def step_down(self) -> None:
        """Release the lease (empty holder) so a peer can take over at once."""
        if not self._leader or self._record is None:
            return
        stamp = microtime(self._wall())
        spec = {
            **self._spec(),
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": stamp,
            "renewTime": stamp,
        }
        try:
            self._record = self._client.replace_lease(
                self._config.namespace, self._config.name, {**self._record, "spec": spec}
            )
        except KubeError as e:
            log.warning("leader election: releasing the lease failed: %s", e)
        self._lose("stepped down")

    def run(
        self,
        stop: threading.Event,
        *,
        on_started_leading: Callable[[int], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
    ) -> None:
        """Tick every `retry_period` until `stop` is set, then step down. Callbacks run on this
        thread: `on_started_leading(term)` on gaining leadership, `on_stopped_leading()` on
        losing it (including at the end)."""
        was_leader = False
        while not stop.is_set():
            leading = self.try_acquire_or_renew()
            if leading and not was_leader and on_started_leading:
                on_started_leading(self._term)
            if was_leader and not leading and on_stopped_leading:
                on_stopped_leading()
            was_leader = leading
            stop.wait(self._config.retry_period)
        self.step_down()
        if was_leader and on_stopped_leading:
            on_stopped_leading()

    # ----- internals ------------------------------------------------------------------------------
    def _spec(self) -> Obj:
        return dict((self._record or {}).get("spec") or {})

    def _observe(self, record: Obj, now: float) -> None:
        self._record = record
        version = str(record.get("metadata", {}).get("resourceVersion", ""))
        if version != self._observed_version:
            self._observed_version, self._observed_at = version, now

    def _expired(self, now: float) -> bool:
        duration = float(self._spec().get("leaseDurationSeconds") or self._config.lease_duration)
        return now >= self._observed_at + duration

    def _lease_spec(self, previous: Mapping[str, Any], holder: str) -> Obj:
        stamp = microtime(self._wall())
        spec = dict(previous)
        if holder != self._config.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(
            holderIdentity=self._config.identity,
            leaseDurationSeconds=round(self._config.lease_duration),
            renewTime=stamp,
        )
        return spec

    def _create(self, now: float) -> bool:
        cfg = self._config
        spec = self._lease_spec({"leaseTransitions": -1}, "")  # first holder: transitions 0
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": cfg.name, "namespace": cfg.namespace},
            "spec": spec,
        }
        try:
            created = self._client.create_lease(cfg.namespace, lease)
        except KubeError as e:
            log.info("leader election: creating lease %s/%s failed: %s", cfg.namespace, cfg.name, e)
            return False
        return self._won(created, now)

    def _write(self, record: Obj, holder: str, now: float) -> bool:
        cfg = self._config
        body = {**record, "spec": self._lease_spec(record.get("spec") or {}, holder)}
        if holder == cfg.identity and self._leader:
            body["metadata"] = self._with_carried(record.get("metadata") or {})
        else:  # taking over: hand on what the record carries, drop notes of an older term
            with self._carried_lock:
                self._carried.clear()
        try:
            updated = self._client.replace_lease(cfg.namespace, cfg.name, body)
        except KubeConflict:
            log.info("leader election: lost a write race on %s/%s", cfg.namespace, cfg.name)
            return self._check_deadline(now)
        except KubeError as e:
            self._trouble.failed(f"renewing failed: {e}")
            return self._check_deadline(now)
        return self._won(updated, now)

    def _with_carried(self, metadata: Mapping[str, Any]) -> Obj:
        annotations = dict(metadata.get("annotations") or {})
        with self._carried_lock:
            for key, value in self._carried.items():
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
        return {**metadata, "annotations": annotations}

    def _won(self, record: Obj, now: float) -> bool:
        self._trouble.succeeded()
        self._observe(record, now)
        self._renewed_at = now
        if not self._leader:
            self._leader, self._term, self._followed = True, self._term + 1, ""
            log.info(
                "leader election: %s leads %s/%s (term %d)",
                self._config.identity,
                self._config.namespace,
                self._config.name,
                self._term,
            )
        return True

    def _follow(self, holder: str) -> None:
        if holder != self._followed:
            self._followed = holder
            cfg = self._config
            log.info(
                "leader election: %s leads %s/%s; %s follows",
                holder,
                cfg.namespace,
                cfg.name,
                cfg.identity,
            )

    def _check_deadline(self, now: float) -> bool:
        if self._leader and now - self._renewed_at >= self._config.renew_deadline:
            self._lose(f"could not renew for {self._config.renew_deadline}s")
        return self._leader

    def _lose(self, why: str) -> None:
        if self._leader:
            self._leader = False
            log.warning("leader election: %s stops leading: %s", self._config.identity, why)
