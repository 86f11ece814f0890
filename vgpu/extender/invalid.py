"""Reporting watched pods the extender skips because they cannot be read.

A pod with an absurd quantity or a malformed spec holds nothing in the ledger; its author learns
why from a Warning Event `InvalidPod` on the pod, the operator from the counter
`vgpu_extender_invalid_pods_total` and a log line. Reported once per pod version (a bounded
memory), and the Events are sent from a thread of their own through a bounded queue: any pod
author can create such pods, so neither their number nor a slow API server may hold up the
watch that reported them (when the queue is full the Event is dropped, the count is not).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Protocol

from vgpu.adapters.kube.errors import KubeError
from vgpu.extender.metrics import ExtenderMetrics

log = logging.getLogger(__name__)

KEPT = 4096
"""Pod versions remembered as reported."""
QUEUED = 256
"""Events waiting to be sent at most."""


class EventApi(Protocol):
    """The one API call reporting needs (`vgpu.adapters.kube.calls.KubeApi` provides it)."""

    def create_event(
        self, involved: Any, *, reason: str, message: str, event_type: str, component: str
    ) -> Any: ...


class InvalidPods:
    """The `ClusterCache` invalid-pod hook (`subscribe(invalid=...)`) of the extender daemon."""

    def __init__(self, api: EventApi, metrics: ExtenderMetrics) -> None:
        self._api, self._metrics = api, metrics
        self._told: dict[tuple[str, str], None] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[dict[str, Any], str] | None] = queue.Queue(QUEUED)
        self._thread = threading.Thread(target=self._send, name="vgpu-extender-events", daemon=True)
        self._thread.start()

    def __call__(self, pod: dict[str, Any], problem: str) -> None:
        meta = pod.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        version = (str(meta.get("uid")), str(meta.get("resourceVersion")))
        with self._lock:  # the watch and a leader's resync both report
            if version in self._told:
                return
            if len(self._told) >= KEPT:
                self._told.pop(next(iter(self._told)))
            self._told[version] = None
        self._metrics.invalid_pods.inc()
        log.warning("skipping pod %s/%s: %s", meta.get("namespace"), meta.get("name"), problem)
        try:
            self._queue.put_nowait((meta, problem))
        except queue.Full:
            log.warning("too many invalid pods to report; no Event for %s", meta.get("name"))

    def close(self) -> None:
        """Stop the sending thread (Events still queued are dropped)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _send(self) -> None:
        while (item := self._queue.get()) is not None:
            meta, problem = item
            try:
                self._api.create_event(
                    {"kind": "Pod", "apiVersion": "v1", "metadata": meta},
                    reason="InvalidPod",
                    message=f"vgpu extender cannot schedule this pod: {problem}"[:1024],
                    event_type="Warning",
                    component="vgpu-extender",
                )
            except KubeError as err:
                log.warning("cannot record an event for pod %s: %s", meta.get("name"), err)
