"""Feeds the pods bound to this node into the hand-off ledger and the agent's other views.

One place sees every pod event, so the ledger (`Handoff`), the container directory, the
tracker of what the kubelet still holds (`KubeletStale`) all learn of a pod the same way, whether from the
watch or from a refresh a device-plugin call asked for (the kubelet's watch can be ahead of
ours: the kubelet may call for a pod our watch has not shown yet).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vgpu.adapters.backoff import Backoff
from vgpu.adapters.kube.calls import KubeApi
from vgpu.adapters.kube.reflector import SYNCED
from vgpu.agent.kubelet_stale import KubeletStale
from vgpu.api.podread import is_terminal
from vgpu.core.errors import VgpuError
from vgpu.core.ids import PodKey
from vgpu.node.containers import ContainerDirectory
from vgpu.node.devices import ResourceNames
from vgpu.node.handoff.admissions import Handoff
from vgpu.node.health_listing import lists_unit_ids
from vgpu.node.podspec import pod_info

if TYPE_CHECKING:
    from vgpu.agent.config import AgentConfig

log = logging.getLogger(__name__)

CHURN = (
    "%s: the kubelet lists vGPU device IDs in pod %s's status "
    "(containerStatuses[].allocatedResourcesStatus, feature gate ResourceHealthStatus) in a new "
    "order at each sync, so it rewrites every running vGPU pod's status about once a minute and "
    "re-queues each pod the extender rejected; install daemonset/kubelet/50-vgpu.conf in this "
    "kubelet's --config-dir and restart it (docs/operations.md, Status writes and retries)"
)

MIRROR = "kubernetes.io/config.mirror"
WARNED_KEPT = 4096
"""Unassigned pods remembered as already warned about (one Event each); a deleted pod is
forgotten at once, and past this many (deletions missed while the watch was down) all are."""
"""A static pod's mirror carries the UID the kubelet knows the pod by: its config hash
(pkg/kubelet/pod/mirror_client.go `CreateMirrorPod`; pkg/kubelet/config/common.go)."""

PodEvent = Callable[[PodKey, str, str, str], None]
"""Record a Warning Event on a pod: (pod, uid, reason, message)."""


class PodFeed:
    """The pod watch and the refresh, both ending in `on_event`."""

    def __init__(
        self,
        config: AgentConfig,
        kube: KubeApi | None,
        names: ResourceNames,
        views: tuple[Handoff, ContainerDirectory, KubeletStale],
        flags: tuple[threading.Event, threading.Event, threading.Event],
        event: PodEvent,
    ) -> None:
        """`views` are what each pod event updates; `flags` are (stop, wake, synced)."""
        self.config = config
        self._kube = kube
        self.names = names
        self.handoff, self.containers, self.stale = views
        self._stop, self._wake, self.synced = flags
        self._event = event
        self._warned: set[str] = set()
        self._churn_told = False
        self._last: dict[str, dict[str, Any]] = {}
        """This node's pods by UID, as last seen: what a restarted watch that no longer lists
        one applies as its deletion (`_forget_unlisted`)."""

    @property
    def selector(self) -> str:
        return f"spec.nodeName={self.config.node_name}"

    def watch(self) -> None:
        """Watch this node's pods until stopped; a broken watch restarts after a backoff. A
        restarted watch is a fresh reflector, whose listing says nothing of pods deleted while
        it was down: at its first SYNCED, the pods it did not list are forgotten
        (`_forget_unlisted`), as a reflector's own relist would."""
        assert self._kube is not None
        cfg = self.config
        backoff = Backoff(cfg.retry_s, cfg.max_retry_s)
        restarted = False
        while not self._stop.is_set():
            listed: set[str] | None = set() if restarted else None
            try:
                for event in self._kube.watch_pods(
                    field_selector=self.selector,
                    stop=self._stop,
                    timeout_seconds=cfg.watch_timeout_s,
                    retry_delay=cfg.retry_s,
                ):
                    if self._stop.is_set():
                        return
                    backoff.reset()
                    if listed is not None and event.type == SYNCED:
                        self._forget_unlisted(listed)
                        listed = None
                    elif listed is not None:
                        listed.add(_uid(event.object))
                    self._apply(event.type, event.object)
            except Exception as e:  # a broken watch must never take the agent down
                restarted = True
                delay = backoff.next_delay()
                log.error("pod watch failed, restarting in %.1fs: %s", delay, e)
                self._stop.wait(delay)

    def _forget_unlisted(self, listed: set[str]) -> None:
        """Apply a deletion for each pod known here whose UID a fresh listing did not show."""
        for uid, pod in list(self._last.items()):
            if uid not in listed:
                log.info("pod %s is gone since the watch broke; forgotten", _key(pod))
                self._apply("DELETED", pod)

    def _apply(self, kind: str, pod: dict[str, Any]) -> None:
        """One event; a pod that cannot be applied is logged and skipped, never a restart of
        the watch (which would meet the same pod again at its relist)."""
        try:
            self.on_event(kind, pod)
        except Exception:  # a bug or a pod no reader foresaw: the other pods still count
            log.exception("applying a %s pod event failed; skipped", kind)

    def refresh(self) -> None:
        """Read this node's pods from the API server now, for a GetPreferredAllocation or an
        Allocate our watch may be behind on (`HandoffPolicy`: a miss, or a pod's first call)."""
        if self._kube is None:
            return
        try:
            listing = self._kube.list_pods(field_selector=self.selector)
        except VgpuError as e:
            log.warning("could not refresh this node's pods for a device-plugin call: %s", e)
            return
        known = set(self.handoff.pods())
        for pod in listing.items:
            self.on_event("MODIFIED", pod)
        new = sorted(set(self.handoff.pods()) - known)
        if new:  # the kubelet's watch was ahead of ours: say so
            log.info("refresh for a device-plugin call found %s", ", ".join(new))

    def on_event(self, kind: str, pod: dict[str, Any]) -> None:
        """One watch event (or SYNCED, the end of a listing) into every view."""
        if kind == "SYNCED":
            self._on_synced()
            return
        uid = _uid(pod)
        if kind == "DELETED":
            self._last.pop(uid, None)
        elif uid:
            self._last[uid] = pod
        info = pod_info(pod, self.names)
        mirror = ((pod.get("metadata") or {}).get("annotations") or {}).get(MIRROR, "")
        live = kind != "DELETED" and not is_terminal(pod)
        held = (kind == "DELETED" or info.terminal) and self.handoff.holds_devices(info.key)
        self.stale.pod(info.key, (info.uid, str(mirror)), live, held)  # finished, deleting or gone
        if kind == "DELETED":
            self.handoff.forget(info.key, info.uid)
            self.containers.forget(pod)
            self._warned.discard(info.uid)
        else:
            self.containers.observe(pod)
            self._tell_churn(info.key, pod)
            problem = self.handoff.observe(info)
            if problem is not None and info.uid not in self._warned:
                if len(self._warned) >= WARNED_KEPT:  # deletions missed while the watch was down
                    self._warned.clear()
                self._warned.add(info.uid)
                log.warning("unassigned pod: %s", problem)
                self._event(info.key, info.uid, "VgpuUnassigned", problem)
        self._wake.set()

    def _tell_churn(self, key: PodKey, pod: dict[str, Any]) -> None:
        """Once per agent: the kubelet here rewrites vGPU pods' statuses (health_listing)."""
        if not self._churn_told and lists_unit_ids(pod, self.names):
            self._churn_told = True
            log.warning(CHURN, self.config.node_name, key)

    def _on_synced(self) -> None:
        if not self.synced.is_set():  # the first listing; relists after a 410 are quiet
            log.info(
                "%s: pod watch synced, %d vgpu pod(s) bound here",
                self.config.node_name,
                len(self.handoff.pods()),
            )
        self.synced.set()
        self.stale.synced()
        self._wake.set()


def _uid(pod: dict[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
