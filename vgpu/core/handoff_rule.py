"""The hand-off rule (docs/handshake.md, invariant I), in one place for the extender and the agent.

A *pending* container is bound to a node with an assignment but not yet admitted by the kubelet.
The kubelet's device-plugin calls carry only a size and device IDs, never the pod, so two pending
containers of different pods are **confusable** when, for cores or for memory blocks, they ask
the same non-zero number of devices and the same IDs would not give both the same grant:

* their GPUs differ: `GetPreferredAllocation` is told only the size, so it could steer one's
  call to the other's GPU (and `Allocate` would then match the wrong pod); or
* their grants differ (shares, memory blocks asked, `vgpu.io/cores-limit`): `Allocate` could
  not tell whose call it is, and would hand one container the other's limits; or
* the containers that follow them in their pods differ (`after`): the kubelet allocates a pod's
  containers one after another (init containers first), so a call taken for the other pod
  would leave each pod expecting the other's next container, and the next call is refused.

The extender never binds a pod whose containers would be confusable with another pod's pending
ones (`conflicts`); the node agent refuses an `Allocate` whose candidates are confusable
(`confusable`). Containers that are not confusable are interchangeable: any attribution gives
the container exactly the devices and limits its own assignment names. Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vgpu.core.ids import GpuUUID, PodKey
from vgpu.core.model import Assignment, GpuShare

AskKey = tuple[str, int]
"""(resource kind "cores" or "memory", number of devices asked)."""


@dataclass(frozen=True, slots=True)
class PendingContainer:
    """One container waiting for admission: its ask keys and the grant its assignment names."""

    pod: PodKey
    container: str
    asks: tuple[AskKey, ...]
    shares: tuple[GpuShare, ...]
    cores_limit: int | None = None
    after: str = ""  # `followers`: a digest of the grants of the pod's later vGPU containers

    @property
    def gpus(self) -> frozenset[GpuUUID]:
        return frozenset(s.uuid for s in self.shares)

    @property
    def grant(self) -> tuple[object, ...]:
        """Everything the container's devices and limits, and its pod's next calls, depend on."""
        return (grant_of(self.shares, self.asks), self.cores_limit, self.after)


def grant_of(shares: Iterable[GpuShare], asks: tuple[AskKey, ...]) -> tuple[object, ...]:
    """One container's grant: its shares (order-free) and its ask keys."""
    return (tuple(sorted((s.uuid, s.cores, s.memory_mmib) for s in shares)), asks)


def followers(
    containers: Iterable[tuple[str, tuple[GpuShare, ...], tuple[AskKey, ...]]],
) -> dict[str, str]:
    """Per container (name, shares, asks; in the kubelet's allocation order), a digest of the
    grants of the containers after it: a pod's `after` as both the extender and the agent
    compute it. A chain of digests, built from the last container back, so a pod of n
    containers costs O(n) and two `after`s compare in O(1) (the tuple of every later grant made
    the filter cubic in a pod's look-alike containers)."""
    items = list(containers)
    out: dict[str, str] = {}
    chain = ""
    for name, shares, asks in reversed(items):
        out[name] = chain
        text = repr((grant_of(shares, asks), chain)).encode()
        chain = hashlib.blake2b(text, digest_size=16).hexdigest()
    return out


def asks_of(cores: int, memory_blocks: int) -> tuple[AskKey, ...]:
    """The ask keys of a container (zero asks are not keys: no Allocate call is made)."""
    keys: list[AskKey] = []
    if cores:
        keys.append(("cores", cores))
    if memory_blocks:
        keys.append(("memory", memory_blocks))
    return tuple(keys)


def confusable(a: PendingContainer, b: PendingContainer) -> AskKey | None:
    """The ask key on which containers of different pods could be mistaken (None: they cannot)."""
    if a.pod == b.pod:
        return None
    shared = sorted(set(a.asks) & set(b.asks))
    if not shared or (a.gpus == b.gpus and a.grant == b.grant):
        return None
    return shared[0]


def pending_of(
    assignment: Assignment,
    memory_blocks: dict[str, int],
    admitted: Iterable[str] = (),
    cores_limit: int | None = None,
    order: Sequence[str] = (),
) -> list[PendingContainer]:
    """The pending containers of an assignment (those not in `admitted`); `order` is the
    kubelet's allocation order of the pod's containers (default: the assignment's)."""
    done = set(admitted)
    rank = {name: i for i, name in enumerate(order)}
    held = sorted(
        (c for c in assignment.containers if c.shares),
        key=lambda c: rank.get(c.name, len(rank)),
    )
    asks = {
        c.name: asks_of(sum(s.cores for s in c.shares), memory_blocks.get(c.name, 0)) for c in held
    }
    after = followers((c.name, c.shares, asks[c.name]) for c in held)
    return [
        PendingContainer(assignment.pod, c.name, asks[c.name], c.shares, cores_limit, after[c.name])
        for c in held
        if c.name not in done
    ]


def conflicts(
    candidate: Iterable[PendingContainer], pending: Iterable[PendingContainer]
) -> list[str]:
    """Why `candidate` containers would be confusable with `pending` ones (empty: they are not):
    for each candidate container, the first pending container it is confusable with.

    Near-linear: pending containers are grouped by ask key and, within one, by (GPUs, grant);
    a candidate is confusable with any group but its own, so one or two groups are looked at per
    ask key and candidate, whatever the number of look-alike containers (the pairwise check cost
    a pod of n look-alike containers n^3)."""
    by_key: dict[AskKey, dict[object, list[PendingContainer]]] = {}
    for p in pending:
        sig = (p.gpus, p.grant)
        for ask in p.asks:
            group = by_key.setdefault(ask, {}).setdefault(sig, [])
            if len(group) < 2 and all(o.pod != p.pod for o in group):
                group.append(p)  # two pods per group: one of them is not the candidate's
    problems = []
    for c in candidate:
        other, key = _first_confusable(c, by_key)
        if other is not None and key is not None:
            why = "another GPU" if c.gpus != other.gpus else "another grant"
            problems.append(
                f"{c.container} would be confusable with {other.pod}/{other.container} "
                f"({key[1]} {key[0]}, {why}) until that pod is admitted"
            )
    return problems


def _first_confusable(
    c: PendingContainer, by_key: dict[AskKey, dict[object, list[PendingContainer]]]
) -> tuple[PendingContainer | None, AskKey | None]:
    """The first pending container `c` is confusable with, and on which ask key."""
    own = (c.gpus, c.grant)
    for ask in c.asks:
        for sig, group in by_key.get(ask, {}).items():
            if sig == own:
                continue
            other = next((o for o in group if o.pod != c.pod), None)
            if other is not None:
                return other, ask
    return None, None


def preferred_gpus(ask: AskKey, pending: Iterable[PendingContainer]) -> frozenset[GpuUUID] | None:
    """The GPUs pending containers with this ask target (None if none pending with this ask)."""
    for p in pending:
        if ask in p.asks:
            return p.gpus
    return None
