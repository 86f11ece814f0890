"""Having the kubelet free, and checkpoint, the devices of deleted pods soon after the deletion;
publishing those it still checkpoints (`KubeletStale`).

The kubelet frees a deleted pod's devices lazily, at its next Allocate or pod-resources `List`
(pkg/kubelet/cm/devicemanager/manager.go `UpdateAllocatedDevices`, called from `Allocate` and
from pkg/kubelet/apis/podresources/server_v1.go `List`), and writes its device checkpoint only at
an Allocate or a ListAndWatch update (`genericDeviceUpdateCallback`). A kubelet restarting before
both reloads the deleted pod's devices as taken, and admits the pods of its first update without
them (docs/handshake.md, "Devices the kubelet still counts after its restart").

So after a pod holding devices finishes or is deleted, the node agent calls `List` every
`delay_s` until the kubelet no longer reports the pod (it has dropped it, and that `List` freed
its devices; a graceful deletion takes the pod's grace period), then sends its unchanged device
lists once more: the kubelet writes its checkpoint. A pod still reported after `patience_s` is
given up on. Pure apart from a lock (the pod watch reports deletions, the agent's loop steps).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from vgpu.api.resources import ResourceNames
from vgpu.core.ids import PodKey
from vgpu.node.checkpoint import CheckpointEntry, StaleDevices, stale_devices


class ReleaseSync:
    def __init__(
        self, clock: Callable[[], float], *, delay_s: float = 1.0, patience_s: float = 120.0
    ) -> None:
        self._clock = clock
        self._delay_s = delay_s
        self._patience_s = patience_s
        self._waiting: dict[PodKey, float] = {}  # deleted pod -> when to give up on it
        self._lock = threading.Lock()
        self.at: float | None = None  # when the next step is due (None: nothing waits)

    def deleted(self, pod: PodKey) -> None:
        """A pod that held devices was deleted."""
        now = self._clock()
        with self._lock:
            self._waiting.setdefault(pod, now + self._patience_s)
            if self.at is None:
                self.at = now + self._delay_s

    def step(self, listed: Callable[[], set[PodKey] | None], republish: Callable[[], None]) -> None:
        """`listed()` calls `List` and returns the pods the kubelet reports holding devices
        (None if the call failed); `republish()` sends the device lists again."""
        pods = listed()
        now = self._clock()
        with self._lock:
            still = {
                pod: until
                for pod, until in self._waiting.items()
                if until > now and (pods is None or pod in pods)
            }
            freed = len(still) < len(self._waiting)
            self._waiting = still
            self.at = now + self._delay_s if still else None
        if freed:
            republish()


PATIENT_STEPS = 120
SLOW_EVERY = 30


class KubeletStale:
    """The devices the kubelet's checkpoint holds for pods no longer bound to the node.

    A kubelet restarting before it frees them reloads them as taken (`ReleaseSync` narrows that
    window, this closes it): the agent publishes them per GPU in the inventory annotation
    (`kubeletStale`), so the extender does not place onto them, until the checkpoint no longer
    holds them. While it does, each step has the kubelet free them (`List`, effective once its
    pod sources are ready) and checkpoint that (device lists resent). The checkpoint is re-read
    when it changed on disk or the node's pods did; `read` and `signature` are the only I/O
    (injected: a file in the device-plugin directory, `vgpu.node.checkpoint`).
    """

    def __init__(
        self,
        read: Callable[[], tuple[tuple[CheckpointEntry, ...], str | None]],
        signature: Callable[[], object],
        names: ResourceNames,
        memory_unit_mib: int,
    ) -> None:
        self._read, self._signature = read, signature
        self._names, self._unit = names, memory_unit_mib
        self._live: set[str] = set()
        self._synced = False
        self._dirty = True
        self._seen: object = None
        self._lock = threading.Lock()
        self.problem: str | None = None
        self.stale: dict[str, StaleDevices] = {}
        self._frees = 0  # steps that asked the kubelet to free the current stale set

    def pod(self, uids: Iterable[str], live: bool) -> None:
        """A pod bound here was seen (`live`: neither finished nor deleted) under these UIDs
        (its own and, for a static pod's mirror, the UID the kubelet knows it by)."""
        with self._lock:
            before = len(self._live)
            if live:
                self._live.update(u for u in uids if u)
            else:
                self._live.difference_update(uids)
            self._dirty = self._dirty or len(self._live) != before

    @property
    def dirty(self) -> bool:
        """Whether the node's pods changed since the last read (read again at once)."""
        return self._dirty and self._synced

    def synced(self) -> None:
        """The pod watch has listed the node's pods: UIDs missing from it are gone."""
        with self._lock:
            self._synced, self._dirty = True, True

    def step(self, free: Callable[[], None]) -> bool:
        """Re-read if anything changed; `free()` while devices are stale. True: `stale` changed."""
        signature = self._signature()
        with self._lock:
            if not self._synced or (not self._dirty and signature == self._seen and not self.stale):
                return False
            self._dirty, self._seen, live = False, signature, set(self._live)
        entries, self.problem = self._read()
        stale = stale_devices(entries, live, self._names, self._unit)
        changed = stale != self.stale
        self.stale = stale
        self._frees = 0 if changed else self._frees + 1
        # Devices of a pod the kubelet still runs but the API does not show (a static pod
        # without a mirror) stay: after PATIENT_STEPS, ask only every SLOW_EVERY steps.
        if stale and (self._frees < PATIENT_STEPS or self._frees % SLOW_EVERY == 0):
            free()
        return changed

    def published(self) -> dict[str, tuple[int, int]]:
        """Per GPU UUID, (cores, memory MiB) for the inventory annotation."""
        return {gpu: (s.cores, s.memory_mib) for gpu, s in self.stale.items()}
