"""Keeps the node agent's view in step with what the kubelet really holds.

The kubelet is the authority on which containers got which devices: its pod-resources `List`
rebuilds the admitted set (and exposes assignment mismatches), its device-manager checkpoint
adds the regular init containers the List never shows (`vgpu.node.handoff.reconcile`), and the
checkpoint shows devices it still counts for pods gone from the node (`KubeletStale`), which
the inventory must publish so the extender does not promise that capacity twice, and which the
kubelet is asked to free.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from vgpu.adapters.kubelet.node_plugins import NodeDevicePlugins
from vgpu.adapters.kubelet.pod_resources import PodResourcesClient, PodResourcesError
from vgpu.adapters.streak import Streak
from vgpu.agent.kubelet_stale import KubeletStale
from vgpu.agent.metrics import NodeMetrics
from vgpu.agent.publish import NodePublisher
from vgpu.api.resources import ResourceNames
from vgpu.core.ids import PodKey
from vgpu.node.checkpoint import CheckpointEntry, CheckpointRead, checkpointed_holdings
from vgpu.node.handoff.admissions import Handoff, HeldDevices

log = logging.getLogger(__name__)


class CheckpointEntries:
    """The kubelet's checkpoint entries, read again only when the file changed on disk.

    Unreadable (no file, a problem `KubeletStale` already logs): no entries, so the ledger
    rests on the List and the pods' status alone, as before the kubelet wrote the file."""

    def __init__(self, read: Callable[[], CheckpointRead], signature: Callable[[], object]):
        self._read, self._signature = read, signature
        self._seen: object = None
        self._entries: tuple[CheckpointEntry, ...] = ()

    def __call__(self) -> tuple[CheckpointEntry, ...]:
        signature = self._signature()
        if signature is None:
            self._seen, self._entries = None, ()
        elif signature != self._seen:
            self._seen, self._entries = signature, self._read().entries or ()
        return self._entries


class KubeletSync:
    """Reconciliation with pod-resources and the stale-device watch over the checkpoint."""

    def __init__(
        self,
        pod_resources: PodResourcesClient,
        handoff: Handoff,
        stale: KubeletStale,
        publisher: NodePublisher,
        metrics: NodeMetrics,
        plugins: Callable[[], NodeDevicePlugins | None],
        checkpoint: tuple[CheckpointEntries, ResourceNames] | None = None,
    ) -> None:
        self.pod_resources = pod_resources
        self._checkpoint = checkpoint
        self.handoff = handoff
        self.stale = stale
        self.publisher = publisher
        self.metrics = metrics
        self._plugins = plugins
        self.mismatches: list[tuple[PodKey, str]] = []
        self.reconciled = threading.Event()  # tried once: readiness waits for it
        self._mode: tuple[bool | None, str | None] = (True, None)  # as last logged
        self._streak = Streak(log, "reconciliation with the kubelet's pod-resources API")

    def reconcile(self) -> list[HeldDevices] | None:
        """Rebuild the admitted set from the kubelet's pod-resources `List` and its checkpoint's
        regular init containers; what the List holds."""
        try:
            held = self.pod_resources.held()
        except PodResourcesError as e:
            self._streak.failed(e)
            self.reconciled.set()  # tried once: readiness must not hang on an old kubelet
            return None
        self._streak.succeeded()
        for pod, message in self.handoff.reconcile(held, self._checkpointed()):
            if (pod, message) in self.mismatches:
                continue
            self.mismatches.append((pod, message))
            self.metrics.mismatches.inc()
            log.error("device IDs differ from the assignment of %s: %s", pod, message)
            self.publisher.pod_event(pod, "", "VgpuAssignmentMismatch", message)
        self._update_gauges()
        self.reconciled.set()
        return held

    def _checkpointed(self) -> list[HeldDevices]:
        """The checkpoint's holdings of the pods the ledger holds an assignment for."""
        if self._checkpoint is None:
            return []
        entries, names = self._checkpoint
        pods = {g.uid: g.pod for g in self.handoff.granted() if g.uid}
        return checkpointed_holdings(entries(), pods, names)

    def listed(self) -> set[PodKey] | None:
        """Reconcile now; the pods the kubelet reports holding devices (None: List failed)."""
        held = self.reconcile()
        return None if held is None else {h.pod for h in held}

    def free_stale(self) -> None:
        """One step of `KubeletStale`: publish what the kubelet's checkpoint holds for pods gone
        and have the kubelet free it, or on the List-only fallback follow deleted pods."""
        step = self.stale.step(self.listed, self._resend)
        if step.changed:
            self.publisher.dirty = True
            gpus = ", ".join(
                f"{gpu}: {s.cores} cores, {s.memory_mib} MiB (pods {', '.join(s.pods)})"
                for gpu, s in self.stale.stale.items()
            )
            log.info("kubelet checkpoint: devices of pods gone from this node: %s", gpus or "none")
        if step.freed:
            log.info(
                "deleted pod(s) %s freed by the kubelet: device lists sent again (checkpoint)",
                ", ".join(step.freed),
            )
        if step.given_up:
            log.warning(
                "the kubelet still reports deleted pod(s) %s: device lists sent again anyway",
                ", ".join(step.given_up),
            )
        self._log_mode()

    def _log_mode(self) -> None:
        """Say once when the checkpoint cannot be read, and so the List-only fallback is on."""
        mode = (self.stale.readable, self.stale.problem)
        if mode == self._mode or self.stale.readable is None:
            return
        self._mode = mode
        fallback = "deleted pods are followed by pod-resources List alone"
        if self.stale.problem:
            log.warning("%s; stale devices are not published, %s", self.stale.problem, fallback)
        elif not self.stale.readable:
            log.info("no kubelet device checkpoint (yet): %s", fallback)
        else:
            log.info("kubelet device checkpoint read: stale devices are published from it")

    def _resend(self) -> None:
        """Send the device lists again so the kubelet checkpoints what it freed."""
        plugins = self._plugins()
        if plugins is not None:
            plugins.republish()

    def _update_gauges(self) -> None:
        pods = self.handoff.pods()
        unassigned = sum(1 for p in pods if self.handoff.problem(p) is not None)
        self.metrics.pods.labels("assigned").set(len(pods) - unassigned)
        self.metrics.pods.labels("unassigned").set(unassigned)


def checkpoint_signature(path: Path) -> object:
    """What tells that the checkpoint changed on disk (None: no file)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
