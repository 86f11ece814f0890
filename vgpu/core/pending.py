"""Invariant I of the hand-off (docs/handshake.md): no confusable pending containers.

A *pending* container is bound to a node with an assignment but not yet admitted by the kubelet.
Two containers of different pods are *confusable* when, for cores or for memory blocks, they ask
the same non-zero number of devices but are assigned different GPUs: the node could not tell
their Allocate calls apart. The extender never lets that happen; these pure functions say whether
a candidate assignment would break it and which GPU would keep it, and `keep_apart` applies them
to a placement (`Scheduler.place`): a conflicting choice is retried on the GPUs the pending
containers target; if the pod does not fit there, the node fails *resolvably* until the pending
pod is admitted (docs/handshake.md, "The protocol", step 3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from vgpu.core.fit import Code, Verdict
from vgpu.core.ids import GpuUUID, PodKey
from vgpu.core.model import Assignment, PodRequest

AskKey = tuple[str, int]
"""(resource kind "cores" or "memory", number of devices asked)."""


@dataclass(frozen=True, slots=True)
class PendingContainer:
    """One container waiting for admission: its ask keys and target GPUs."""

    pod: PodKey
    container: str
    asks: tuple[AskKey, ...]
    gpus: frozenset[GpuUUID]


def asks_of(cores: int, memory_blocks: int) -> tuple[AskKey, ...]:
    """The ask keys of a container (zero asks are not keys: no Allocate call is made)."""
    keys: list[AskKey] = []
    if cores:
        keys.append(("cores", cores))
    if memory_blocks:
        keys.append(("memory", memory_blocks))
    return tuple(keys)


def pending_of(
    assignment: Assignment, memory_blocks: Mapping[str, int], admitted: Iterable[str] = ()
) -> list[PendingContainer]:
    """The pending containers of an assignment (those not in `admitted`)."""
    done = set(admitted)
    out = []
    for c in assignment.containers:
        if c.name in done or not c.shares:
            continue
        cores = sum(s.cores for s in c.shares)
        out.append(
            PendingContainer(
                assignment.pod,
                c.name,
                asks_of(cores, memory_blocks.get(c.name, 0)),
                frozenset(s.uuid for s in c.shares),
            )
        )
    return out


def conflicts(
    candidate: Iterable[PendingContainer], pending: Iterable[PendingContainer]
) -> list[str]:
    """Why `candidate` containers would be confusable with `pending` ones (empty: they are not)."""
    by_key: dict[AskKey, list[PendingContainer]] = {}
    for p in pending:
        for key in p.asks:
            by_key.setdefault(key, []).append(p)
    problems = []
    for c in candidate:
        for key in c.asks:
            for other in by_key.get(key, ()):
                if other.pod != c.pod and other.gpus != c.gpus:
                    problems.append(
                        f"{c.container} would be confusable with {other.pod}/{other.container} "
                        f"({key[1]} {key[0]}) until that pod is admitted"
                    )
    return problems


def preferred_gpus(ask: AskKey, pending: Iterable[PendingContainer]) -> frozenset[GpuUUID] | None:
    """The GPUs pending containers with this ask target (None if none pending with this ask)."""
    for p in pending:
        if ask in p.asks:
            return p.gpus
    return None


def keep_apart(
    first: Assignment,
    pending: Sequence[PendingContainer],
    memory_blocks: Mapping[str, int],
    retry: Callable[[PodRequest], Assignment | Verdict],
    pod: PodRequest,
) -> Assignment | Verdict:
    """`first`, or a placement on the GPUs the pending containers target (`retry` places the
    narrowed pod on the same node), or a resolvable verdict: the pod waits for admissions."""
    problems = conflicts(pending_of(first, memory_blocks), pending)
    if not problems:
        return first
    targets: set[GpuUUID] = set()
    for container in pending_of(first, memory_blocks):
        for ask in container.asks:
            targets |= preferred_gpus(ask, pending) or frozenset()
    narrowed = _narrow(pod, frozenset(targets))
    if narrowed is not None:
        second = retry(narrowed)
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
