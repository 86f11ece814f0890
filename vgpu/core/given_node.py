"""Placing a pod on a given node (the one kube-scheduler chose), as the kubelet will admit it.

GPU choice itself, on any node, is `vgpu.core.placement`'s; this module adds what a given node
with pending admissions and init-container reuse asks on top of it.

The extender's one entry to the core's placement (the simulator's is `Scheduler.select`; both
reach GPUs through `Scheduler.place`/`select`, i.e. the policy's evaluation then its `finish`):

* init containers whose devices the kubelet hands on to later containers are placed together
  and charged once (`kubelet_reuse.place_reusing`);
* invariant I (docs/handshake.md): a choice that would make a container confusable with one
  pending admission on the node (`handoff_rule.conflicts`) is retried on the GPUs the pending
  containers target; if the pod does not fit there, the node fails *resolvably* until the pending
  pod is admitted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from vgpu.core.fit import Code, Verdict
from vgpu.core.handoff_rule import PendingContainer, conflicts, preferred_gpus
from vgpu.core.ids import GpuUUID, NodeName
from vgpu.core.kubelet_reuse import Role, place_reusing, reuses
from vgpu.core.model import Assignment, PodRequest
from vgpu.core.policy.interface import Policy
from vgpu.core.scheduler import Scheduler

Describe = Callable[[Assignment], list[PendingContainer]]
"""The pending containers a candidate assignment would create (ask keys and grants)."""


def place(
    scheduler: Scheduler,
    pod: PodRequest,
    node: NodeName,
    policy: Policy | None = None,
    *,
    roles: Mapping[str, Role] | None = None,
    pending: Sequence[PendingContainer] = (),
    describe: Describe | None = None,
) -> Assignment | Verdict:
    """An assignment on `node` keeping invariant I, or a verdict saying why there is none."""

    def attempt(request: PodRequest) -> Assignment | Verdict:
        if roles and reuses(request, roles):
            return place_reusing(scheduler, request, node, roles, policy)
        return scheduler.place(request, node, policy)

    first = attempt(pod)
    if isinstance(first, Verdict) or not pending or describe is None:
        return first
    return keep_apart(first, pending, describe, attempt, pod)


def keep_apart(
    first: Assignment,
    pending: Sequence[PendingContainer],
    describe: Describe,
    retry: Callable[[PodRequest], Assignment | Verdict],
    pod: PodRequest,
) -> Assignment | Verdict:
    """`first`, or a placement on the GPUs the pending containers target (`retry` places the
    narrowed pod on the same node), or a resolvable verdict: the pod waits for admissions."""
    described = describe(first)
    problems = conflicts(described, pending)
    if not problems:
        return first
    targets: set[GpuUUID] = set()
    for container in described:
        for ask in container.asks:
            targets |= preferred_gpus(ask, pending) or frozenset()
    narrowed = _narrow(pod, frozenset(targets))
    if narrowed is not None:
        second = retry(narrowed)
        if not isinstance(second, Verdict) and not conflicts(describe(second), pending):
            return second
    return Verdict(Code.GPU_BUSY, (f"waiting for admission: {problems[0]}",))


def _narrow(pod: PodRequest, targets: frozenset[GpuUUID]) -> PodRequest | None:
    include = pod.selector.include_uuids
    allowed = (include & targets) if include else targets
    allowed -= pod.selector.exclude_uuids
    if not allowed:
        return None
    return replace(pod, selector=replace(pod.selector, include_uuids=allowed))
