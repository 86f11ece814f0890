"""Having the kubelet free, and checkpoint, the devices of deleted pods soon after the deletion.

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
from collections.abc import Callable

from vgpu.core.ids import PodKey


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
