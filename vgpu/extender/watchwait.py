"""A request names its pod; the pod is read from the watch alone (a body could describe anything).

kube-scheduler's informer and the extender's pod watch are two streams from the API server, so a
new pod's first filter can arrive before the extender's watch shows it. Such a request is not
answered from its body (a body is the client's word, not the cluster's). Its verb waits, at most
`timeout` seconds, for the watch's event (woken by the cache's change condition, which every pod
event notifies; no polling), and if the watch still does not show the pod under the UID the
request names, the verb fails with `NotWatched`.

Why an error and not a filter that refuses every node: kube-scheduler treats both as a failed
scheduling cycle, but a filter error (pkg/scheduler/schedule_one.go, findNodesThatPassExtenders:
a non-ignorable extender's error fails `schedulePod`) sends the pod to the backoff queue
(pkg/scheduler/backend/queue/scheduling_queue.go, AddUnschedulableIfNotPresent: no rejecting
plugin, so backoffQ; 1 s at first) and retries it, whereas every node refused is a FitError,
which runs PostFilter, i.e. preemption, for a pod nobody has verified. The retry a second later
finds the pod in the watch.

Why no GET of the pod from the API server instead: an object fetched outside the watch could not
be put into the watch's cache without risking a newer watch version being overridden, so it
could only answer, holding nothing; it would save the pod one backoff second, at the price of an
API call for every name a client with the scheduler's certificate invents (the issue counted
27,845 GETs from one such client).

Bounded: at most `waiters` verbs wait at once (the verb pool is shared with binds); one more
fails at once, as does a request naming no UID. On the serving loop's thread nothing waits:
`LeaveLoop` sends the request to a worker (`vgpu.extender.offloop`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from vgpu.api.podspec import PodSpec
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import PodKey
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.offloop import LeaveLoop, may_block

WATCH_WAIT_S = 1.0
"""How long a verb waits for the watch to show the pod its request names."""
WATCH_WAITERS = 4
"""How many verbs may wait at once (of the 16 verb threads, which binds share)."""


class NotWatched(InvalidRequest):
    """The watch does not show the pod the request names (answered as an error: retried)."""

    def __init__(self, key: PodKey, uid: str, why: str) -> None:
        super().__init__(
            "metadata.uid",
            f"pod {key} with UID {uid or '(none)'} is not in the extender's pod watch ({why})",
            "kube-scheduler retries the pod after its backoff; a pod that exists is in the "
            "watch by then",
        )
        self.why = why


class WatchWait:
    """Finds the pod a request names in the watch, waiting for it a bounded time."""

    def __init__(
        self,
        cache: ClusterCache,
        *,
        timeout: float = WATCH_WAIT_S,
        waiters: int = WATCH_WAITERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache = cache
        self._timeout = timeout
        self._slots = threading.BoundedSemaphore(waiters) if waiters > 0 else None
        self._clock = clock
        """Real time (not the verbs' clock, which tests may hold still): the wait is real."""

    def shown(self, key: PodKey, uid: str) -> PodSpec | None:
        """The watch's view of the pod if it shows it under `uid` now; never waits."""
        spec = self._cache.pod(key) if uid else None
        return spec if spec is not None and spec.request.uid == uid else None

    def find(self, key: PodKey, uid: str, *, wait: bool = True) -> PodSpec:
        """The watch's view of the pod (same key and UID), waiting for it if `wait`. Raises
        `NotWatched`, or `LeaveLoop` on the serving loop's thread when it would wait."""
        spec = self.shown(key, uid)
        if spec is not None:
            return spec
        if not uid:
            raise NotWatched(key, uid, "the request names no UID")
        problem = self._cache.invalid.get(key)
        if problem is not None:  # the watch shows it but cannot read it: no wait helps
            raise NotWatched(key, uid, f"its watched version cannot be read: {problem}")
        if not wait or self._slots is None or self._timeout <= 0:
            raise NotWatched(key, uid, "not shown")
        if not may_block():
            raise LeaveLoop
        if not self._slots.acquire(blocking=False):
            raise NotWatched(key, uid, "too many requests already wait for the watch")
        try:
            spec = self._wait(key, uid)
        finally:
            self._slots.release()
        if spec is None:
            raise NotWatched(key, uid, f"not shown within {self._timeout:g} s")
        return spec

    def _wait(self, key: PodKey, uid: str) -> PodSpec | None:
        """Wait for a pod event showing the pod; checked and waited under the cache's lock, so
        an event between the check and the wait cannot be missed."""
        deadline = self._clock() + self._timeout
        with self._cache.atomic():
            while (spec := self.shown(key, uid)) is None:
                left = deadline - self._clock()
                if left <= 0:
                    return None
                self._cache.wait_changed(left)
            return spec
