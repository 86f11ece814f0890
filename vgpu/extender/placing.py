"""Placement on one node that respects invariant I (no confusable pending containers).

`Scheduler.place` chooses the GPUs with the pod's policy. If a chosen container has the same ask
key as a container of another pod still pending admission on that node but a different GPU, the
kubelet could not tell their Allocate calls apart. Then the pod is retried on the GPUs those
pending containers target; if it does not fit there, the node fails *resolvably* until the
pending pod is admitted (docs/handshake.md, "The protocol", step 3).
"""

from __future__ import annotations

from dataclasses import replace

from vgpu.core.fit import Code, Verdict
from vgpu.core.ids import GpuUUID, NodeName
from vgpu.core.model import Assignment, PodRequest
from vgpu.core.pending import PendingContainer, conflicts, pending_of, preferred_gpus
from vgpu.core.policies import Policy
from vgpu.core.scheduler import Scheduler


def place(
    scheduler: Scheduler,
    pod: PodRequest,
    node: NodeName,
    pending: list[PendingContainer],
    memory_blocks: dict[str, int],
    policy: Policy | None = None,
) -> Assignment | Verdict:
    """An assignment on `node` keeping invariant I, or a verdict saying why there is none."""
    first = scheduler.place(pod, node, policy)
    if isinstance(first, Verdict) or not pending:
        return first
    problems = conflicts(pending_of(first, memory_blocks), pending)
    if not problems:
        return first
    targets: set[GpuUUID] = set()
    for container in pending_of(first, memory_blocks):
        for ask in container.asks:
            gpus = preferred_gpus(ask, pending)
            if gpus:
                targets |= gpus
    narrowed = _narrow(pod, frozenset(targets))
    if narrowed is not None:
        second = scheduler.place(narrowed, node, policy)
        if not isinstance(second, Verdict) and not conflicts(
            pending_of(second, memory_blocks), pending
        ):
            return second
    return Verdict(Code.GPU_BUSY, (f"waiting for admission: {problems[0]}",))


def _narrow(pod: PodRequest, targets: frozenset[GpuUUID]) -> PodRequest | None:
    include = pod.selector.include_uuids
    allowed = (include & targets) if include else targets
    allowed -= pod.selector.exclude_uuids
    if not allowed:
        return None
    return replace(pod, selector=replace(pod.selector, include_uuids=allowed))
