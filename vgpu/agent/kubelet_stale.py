"""Having the kubelet free, and checkpoint, the devices of pods gone from the node, and publishing
those it still holds (`KubeletStale`).

The kubelet frees a deleted pod's devices lazily, at its next Allocate or pod-resources `List`,
and only once each of its pod sources has delivered a first update
(pkg/kubelet/cm/devicemanager/manager.go `UpdateAllocatedDevices`, called from `Allocate` and
from pkg/kubelet/apis/podresources/server_v1.go `List`); it writes its device checkpoint only at
an Allocate or a ListAndWatch update (`genericDeviceUpdateCallback`, `writeCheckpoint`). A
kubelet restarting before both reloads the deleted pod's devices as taken (`readCheckpoint`)
and admits the pods of its first update (pkg/kubelet/kubelet.go `syncLoopIteration`, ADD)
without them (docs/handshake.md, "Devices the kubelet still counts after its restart").

One mechanism covers both halves. While the checkpoint is readable it is the measure: whatever
it holds for pods no longer bound here is published, and each step asks the kubelet to free it
(`List`) and to checkpoint that (device lists resent), until the file no longer holds it. While
it cannot be read (no file, no permission, a format we do not know), nothing is published and
the agent falls back to following each deleted pod that held devices: `List` every step until
the kubelet no longer reports the pod (that call freed its devices; a graceful deletion takes
its grace period), then the device lists once more. A pod still reported after `patience_s` is
given up on (the lists are sent anyway).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from vgpu.api.resources import ResourceNames
from vgpu.core.ids import PodKey
from vgpu.node.checkpoint import CheckpointRead, StaleDevices, stale_devices

PATIENT_STEPS = 120
SLOW_EVERY = 30

Listed = Callable[[], set[PodKey] | None]
"""Calls `List`: the pods the kubelet reports holding devices (None: the call failed)."""


@dataclass(frozen=True, slots=True)
class StaleStep:
    """What one step found: whether `stale` changed, and on the List-only fallback the deleted
    pods the kubelet dropped (`freed`) or that were given up on (`given_up`) before the device
    lists were sent again."""

    changed: bool = False
    freed: tuple[PodKey, ...] = ()
    given_up: tuple[PodKey, ...] = ()


class KubeletStale:
    """The devices the kubelet holds for pods no longer bound to the node, and having the kubelet free them.

    The checkpoint is re-read when it changed on disk, when the node's pods did, and every step
    while it holds stale devices; `read` and `signature` are the only I/O (injected: a file in
    the device-plugin directory, `vgpu.node.checkpoint`). Pure apart from a lock (the pod watch
    reports pods, the agent's loop steps).
    """

    def __init__(
        self,
        read: Callable[[], CheckpointRead],
        signature: Callable[[], object],
        names: ResourceNames,
        memory_unit_mib: int,
        *,
        clock: Callable[[], float],
        patience_s: float = 120.0,
    ) -> None:
        self._read, self._signature = read, signature
        self._names, self._unit = names, memory_unit_mib
        self._clock, self._patience_s = clock, patience_s
        self._live: set[str] = set()
        self._waiting: dict[PodKey, float] = {}  # deleted pod -> when to give up (fallback)
        self._synced = False
        self._dirty = True
        self._seen: object = None
        self._lock = threading.Lock()
        self.problem: str | None = None  # why the checkpoint could not be read
        self.readable: bool | None = None  # None until the first read
        self.stale: dict[str, StaleDevices] = {}
        self._frees = 0  # steps that asked the kubelet to free the current stale set

    def pod(self, key: PodKey, uids: Iterable[str], live: bool, held: bool) -> None:
        """A pod bound here was seen (`live`: neither finished nor deleted) under these UIDs
        (its own and, for a static pod's mirror, the UID the kubelet knows it by); `held`: the
        agent granted it devices, so a finished or deleted one is followed on the fallback."""
        now = self._clock()
        with self._lock:
            before = len(self._live), len(self._waiting)
            if live:
                self._live.update(u for u in uids if u)
            else:
                self._live.difference_update(uids)
                if held:
                    self._waiting.setdefault(key, now + self._patience_s)
            after = len(self._live), len(self._waiting)
            self._dirty = self._dirty or after != before

    @property
    def dirty(self) -> bool:
        """Whether the node's pods changed since the last step (step again at once)."""
        return self._dirty and self._synced

    @property
    def following(self) -> tuple[PodKey, ...]:
        """The deleted pods the List-only fallback still waits for the kubelet to drop."""
        with self._lock:
            return tuple(sorted(self._waiting))

    def synced(self) -> None:
        """The pod watch has listed the node's pods: UIDs missing from it are gone."""
        with self._lock:
            self._synced, self._dirty = True, True

    def step(self, listed: Listed, resend: Callable[[], None]) -> StaleStep:
        """Re-read if anything changed; have the kubelet free what is stale (`listed()`, then
        `resend()` the device lists), or on the fallback what deleted pods held."""
        signature = self._signature()
        with self._lock:
            if not self._synced:
                return StaleStep()
            fresh = self._dirty or signature != self._seen or bool(self.stale)
            self._dirty, self._seen, live = False, signature, set(self._live)
        changed = self._reread(live) if fresh else False
        if self.readable:
            with self._lock:
                self._waiting.clear()  # the checkpoint shows what the kubelet still holds
            # Devices of a pod the kubelet still runs but the API does not show (a static pod
            # without a mirror) stay: after PATIENT_STEPS, ask only every SLOW_EVERY steps.
            if self.stale and (self._frees < PATIENT_STEPS or self._frees % SLOW_EVERY == 0):
                listed()
                resend()
            return StaleStep(changed)
        return self._follow(listed, resend, changed)

    def _reread(self, live: set[str]) -> bool:
        """Read the checkpoint; True: `stale` changed."""
        got = self._read()
        self.problem, self.readable = got.problem, got.entries is not None
        stale = stale_devices(got.entries or (), live, self._names, self._unit)
        changed = stale != self.stale
        self.stale = stale
        self._frees = 0 if changed else self._frees + 1
        return changed

    def _follow(self, listed: Listed, resend: Callable[[], None], changed: bool) -> StaleStep:
        """The List-only fallback: drop the deleted pods the kubelet no longer reports (that List
        freed their devices) or waited for past patience; if any, resend the device lists."""
        with self._lock:
            if not self._waiting:
                return StaleStep(changed)
        pods = listed()
        now = self._clock()
        with self._lock:
            gone = [p for p in self._waiting if pods is not None and p not in pods]
            late = [p for p, until in self._waiting.items() if until <= now and p not in gone]
            for pod in (*gone, *late):
                del self._waiting[pod]
        if gone or late:
            resend()
        return StaleStep(changed, tuple(sorted(gone)), tuple(sorted(late)))

    def published(self) -> dict[str, tuple[int, int]]:
        """Per GPU UUID, (cores, memory MiB) for the inventory annotation."""
        return {gpu: (s.cores, s.memory_mib) for gpu, s in self.stale.items()}
