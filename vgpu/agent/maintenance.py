"""The node agent's maintenance loop: one thread for every periodic write and reconciliation.

One loop rather than a thread per duty because the duties feed each other (a stale device found
marks the node dirty; a reconciliation settles what the kubelet freed) and share one wake-up event, which the
pod watch, health changes and admissions set so that the next step runs at once. Each duty has its
own deadline; API failures back off (capped, jittered, exponential) from the first one. Any
exception in one duty (a bug, an object no reader foresaw) is logged and retried after the
duty's next deadline, never the end of the loop; the loop beats `agent.liveness` every turn, so a
dead or stuck loop turns `/healthz` red (`vgpu.adapters.liveness`).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from vgpu.adapters.backoff import Backoff
from vgpu.adapters.heap import release_free_heap
from vgpu.adapters.liveness import Liveness, done
from vgpu.agent.config import AgentConfig
from vgpu.agent.kubelet_stale import KubeletStale
from vgpu.agent.kubelet_sync import KubeletSync
from vgpu.agent.publish import NodePublisher
from vgpu.node.handoff.admissions import Handoff

LOOP = "maintenance"
"""The loop's name in `agent.liveness`."""


class Maintained(Protocol):
    """What the loop uses of the agent (`vgpu.agent.agent.NodeAgent` is one): its parts, not
    the agent that wires them, so the agent imports this module and not the other way."""

    @property
    def config(self) -> AgentConfig: ...

    @property
    def liveness(self) -> Liveness: ...

    @property
    def publisher(self) -> NodePublisher: ...

    @property
    def handoff(self) -> Handoff: ...

    @property
    def kubelet(self) -> KubeletSync: ...

    @property
    def stale(self) -> KubeletStale: ...

    def ready(self) -> bool: ...


def run_maintenance(
    agent: Maintained, stop: threading.Event, wake: threading.Event, synced: threading.Event
) -> None:
    """Node metadata every `reconcile_s` (and when dirty), reconciliation every
    `reconcile_s` once the pod watch has synced, admitted annotations when they change.
    API failures back off (capped, jittered, exponential) from the first one."""
    cfg, forever = agent.config, float("inf")
    node_backoff = Backoff(cfg.retry_s, cfg.max_retry_s)
    patch_backoff = Backoff(cfg.retry_s, cfg.max_retry_s)
    node_at = node_retry = reconcile_at = unsure_at = patch_retry = stale_at = 0.0
    settled = False
    duty = agent.liveness.run_duty
    while not stop.is_set():
        agent.liveness.beat(LOOP)
        wake.clear()
        now = time.monotonic()
        if now >= node_at or (agent.publisher.dirty and now >= node_retry):
            if duty("publishing the node's inventory", agent.publisher.sync_node):
                node_backoff.reset()
                node_at, node_retry = now + cfg.reconcile_s, now
            else:
                node_at = node_retry = now + node_backoff.next_delay()
        unsure = agent.handoff.has_unsure()  # an attribution waits for the kubelet's record
        if synced.is_set() and (now >= reconcile_at or (unsure and now >= unsure_at)):
            duty("reconciling with the kubelet", done(agent.kubelet.reconcile))
            reconcile_at, unsure_at = now + cfg.reconcile_s, now + cfg.unsure_reconcile_s
        if now >= stale_at or agent.stale.dirty:  # a deletion: publish before a bind
            duty("publishing kubelet-held devices", done(agent.kubelet.free_stale))
            stale_at = now + cfg.stale_sync_s
        if now >= patch_retry:
            if duty("writing vgpu.io/admitted", agent.publisher.patch_admitted):
                patch_backoff.reset()
            else:
                patch_retry = now + patch_backoff.next_delay()
        if not settled and agent.ready():
            settled = True
            release_free_heap()  # once, the start-up garbage: see vgpu.adapters.heap
        due = min(
            node_at,
            node_retry if agent.publisher.dirty else forever,
            reconcile_at if synced.is_set() else forever,
            unsure_at if synced.is_set() and agent.handoff.has_unsure() else forever,
            patch_retry if patch_retry > now else forever,
            stale_at,
        )
        wake.wait(min(max(due - time.monotonic(), 0.0), cfg.reconcile_s))
