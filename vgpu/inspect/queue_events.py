"""The queue leader's own word on a held pod: its latest `VgpuQueued` Event.

The leader decides whether a held job fits whole on real GPUs (it holds the place it finds), so
only it can say why a job that the configuration alone would let go still waits; it writes
that reason, with where the queue stands, as a `VgpuQueued` Event on the pod when the reason
changes (`vgpu.extender.queues.release_loop`). Both the queue report and the waiting pods' reasons
(`-d`) read it here, so they say the same words. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vgpu.api.queues.config import QUEUE_GATE, QUEUE_LABEL
from vgpu.api.queues.in_force import QUEUED_EVENT
from vgpu.inspect.lease import parse_time

Obj = Mapping[str, Any]


def is_held(pod: Obj) -> bool:
    """Whether the pod still carries the queue's scheduling gate."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(g, dict) and g.get("name") == QUEUE_GATE for g in gates)


def leader_words(pod: Obj, events: Iterable[Obj]) -> str:
    """The message of the newest `VgpuQueued` Event about this pod ("" when none)."""
    best: tuple[float, str] | None = None
    for e in events:
        if e.get("reason") != QUEUED_EVENT or not about_pod(e, pod):
            continue
        stamp = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
        when = parse_time(stamp)
        key = (when.timestamp() if when else 0.0, " ".join(str(e.get("message") or "").split()))
        best = key if best is None or key[0] >= best[0] else best
    return best[1] if best else ""


def held_reason(pod: Obj, events: Iterable[Obj]) -> str:
    """Why a pod the queue's gate holds waits, as the waiting pods' list says it."""
    queue = ((pod.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL, "?")
    said = leader_words(pod, events)
    return f"held by queue {queue}: " + (
        f"leader: {said}" if said else "no word from the leader yet (see --queues)"
    )


def about_pod(event: Obj, pod: Obj) -> bool:
    """Whether `event` is about this very pod: same namespace and name, and the same UID when
    both carry one (a pod recreated under the same name is another pod)."""
    ref = event.get("involvedObject") or {}
    meta = pod.get("metadata") or {}
    if ref.get("name") != meta.get("name"):
        return False
    if (ref.get("namespace") or "default") != (meta.get("namespace") or "default"):
        return False
    return not (ref.get("uid") and meta.get("uid")) or ref.get("uid") == meta.get("uid")
