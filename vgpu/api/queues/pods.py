"""A queued pod as the leader's release loop and `kubectl inspect vgpu --queues` both read it.

One reading for both, so the report shows what the leader decides on: the pod's queue (its
label), its ask in core units and `vgpu.io/memory` blocks, whether the queue gate still holds
it, its gang and the gang's size, with the memory it is given counted (`counted`: a share
asking cores only is given its cores' part of the GPU's memory; a placed pod counts what its
place holds, one not yet placed what the largest GPU would give it). And one capacity:
`CORES_PER_GPU` core units and the memory blocks of each healthy GPU. Pure: the caller parses
the pod (`podspec.pod_spec`) and resolves the gang's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from vgpu.api.nodefit import NO_TERMS, NodeTerms
from vgpu.api.podspec import PodSpec
from vgpu.api.queues.config import QUEUE_GATE, gates_of, queue_of
from vgpu.core.model import GpuShare
from vgpu.core.queues.jobs import QueuedPod, given_memory, held_memory
from vgpu.core.queues.proportion import Vec
from vgpu.core.queues.whole_gpus import asks_whole
from vgpu.core.units import CORES_PER_GPU


@dataclass(frozen=True, slots=True)
class Queued:
    """A pod carrying the queue label, as last watched."""

    pod: QueuedPod
    uid: str
    gates: tuple[str, ...]
    node: str
    started: float
    deleting: bool
    terms: NodeTerms = NO_TERMS
    """Its constraints on its node (`vgpu.api.nodefit`): where the pass may place it and
    reclaim may evict for it."""


def queued_pod(obj: dict[str, Any], parsed: PodSpec, gang_size: int) -> Queued | None:
    """The pod as a queued pod, or None: no queue label, or finished."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    queue = queue_of(meta)
    if queue is None or parsed.terminal:
        return None
    cores = sum(c.cores for c in parsed.request.containers)
    gates = tuple(gates_of(spec))
    created = epoch(meta.get("creationTimestamp"))
    started = epoch((obj.get("status") or {}).get("startTime")) or created
    key = str(parsed.request.key)
    pod = QueuedPod(
        key=key,
        queue=queue,
        namespace=key.split("/", 1)[0],
        ask=(cores, sum(parsed.memory_blocks.values())),
        gated=QUEUE_GATE in gates,
        priority=int(spec.get("priority") or 0),
        created=created,
        gang=str(parsed.gang.key) if parsed.gang else None,
        gang_size=max(1, gang_size),
        uid=str(meta.get("uid") or ""),
        whole=asks_whole(parsed.request),
        gpus=tuple((c.cores, c.memory_mib) for c in parsed.request.containers if c.cores > 0),
    )
    deleting = bool(meta.get("deletionTimestamp"))
    uid = str(meta.get("uid") or "")
    return Queued(pod, uid, gates, parsed.node, started, deleting, parsed.terms)


def capacity(gpus: Iterable[tuple[bool, int]], unit_mib: int) -> Vec:
    """The vGPU capacity of `gpus` given as (healthy, memory MiB): core units, memory blocks."""
    cores = memory = 0
    for healthy, memory_mib in gpus:
        if healthy:
            cores += CORES_PER_GPU
            memory += memory_mib // unit_mib
    return (cores, memory)


def largest_gpu_mib(gpus: Iterable[tuple[bool, int]]) -> int:
    """The memory of the largest healthy GPU of `gpus` (healthy, memory MiB); 0 when none: what
    a queued pod is counted as given before it is placed (`vgpu.core.queues.jobs.given_memory`)."""
    return max((memory_mib for healthy, memory_mib in gpus if healthy), default=0)


def counted(
    recs: Iterable[Queued],
    gpu_memory_mib: int,
    unit_mib: int,
    holds: Mapping[str, Sequence[GpuShare]] | None = None,
) -> list[Queued]:
    """The queued pods with their memory counted in their asks: a pod in `holds` (key to the
    shares it holds, `Assignment.charged`: reserved, assumed or bound) the memory it holds
    (`held_memory`), any other the memory it would be given on a GPU of `gpu_memory_mib`, the
    largest (`given_memory`). The one reading for the leader and `kubectl inspect vgpu
    --queues`."""
    held = holds or {}
    out = []
    for r in recs:
        shares = held.get(r.pod.key)
        if shares is not None:
            out.append(replace(r, pod=held_memory(r.pod, shares, unit_mib)))
        elif r.pod.gpus:
            out.append(replace(r, pod=given_memory(r.pod, gpu_memory_mib, unit_mib)))
        else:
            out.append(r)
    return out


def epoch(stamp: object) -> float:
    """An RFC 3339 time as seconds since the epoch; 0 when absent or unreadable."""
    if not isinstance(stamp, str) or not stamp:
        return 0.0
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
