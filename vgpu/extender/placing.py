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
from vgpu.core.handoff_rule import PendingContainer, conflicts, preferred_gpus
from vgpu.core.ids import GpuUUID, NodeName
from vgpu.core.kubelet_reuse import place_reusing, reuses
from vgpu.core.model import Assignment, PodRequest
from vgpu.core.policies import Policy
from vgpu.core.scheduler import Scheduler
from vgpu.extender.podspec import PodSpec


def place(
    scheduler: Scheduler,
    spec: PodSpec,
    node: NodeName,
    pending: list[PendingContainer],
    policy: Policy | None = None,
    pod: PodRequest | None = None,
) -> Assignment | Verdict:
    """An assignment on `node` keeping invariant I, or a verdict saying why there is none.
    `pod` overrides `spec.request` (a narrowed copy)."""
    pod = pod or spec.request

    def attempt(request: PodRequest) -> Assignment | Verdict:
        if reuses(request, spec.roles):
            return place_reusing(scheduler, request, node, spec.roles, policy)
        return scheduler.place(request, node, policy)

    first = attempt(pod)
    if isinstance(first, Verdict) or not pending:
        return first
    problems = conflicts(spec.pending(first), pending)
    if not problems:
        return first
    targets: set[GpuUUID] = set()
    for container in spec.pending(first):
        for ask in container.asks:
            gpus = preferred_gpus(ask, pending)
            if gpus:
                targets |= gpus
    narrowed = _narrow(pod, frozenset(targets))
    if narrowed is not None:
        second = attempt(narrowed)
        if not isinstance(second, Verdict) and not conflicts(spec.pending(second), pending):
            return second
    return Verdict(Code.GPU_BUSY, (f"waiting for admission: {problems[0]}",))


def _narrow(pod: PodRequest, targets: frozenset[GpuUUID]) -> PodRequest | None:
    include = pod.selector.include_uuids
    allowed = (include & targets) if include else targets
    allowed -= pod.selector.exclude_uuids
    if not allowed:
        return None
    return replace(pod, selector=replace(pod.selector, include_uuids=allowed))
