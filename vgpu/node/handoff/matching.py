"""Which of the ledger's containers an Allocate could be for: the hand-off's matching rules.

The kubelet does not say which pod an Allocate serves, so the ledger answers from order and
shape alone: per pod, only the next container in spec order still waiting for a resource can be
the caller (the kubelet allocates a pod's containers in order, init containers first), and a
call matches containers whose ask and assigned GPUs equal the call's. Functions over the
ledger's entries; the caller holds the ledger's lock.
"""

from __future__ import annotations

from collections.abc import Iterable

from vgpu.core.ids import PodKey
from vgpu.node.devices import UnitKind
from vgpu.node.handoff.entries import PodEntry
from vgpu.node.podspec import ContainerAsk

Entries = dict[PodKey, PodEntry]


def pending_entries(pods: Entries, kind: UnitKind) -> Iterable[tuple[PodEntry, ContainerAsk]]:
    """Per assigned pod, the one container the kubelet can allocate `kind` for next: the
    first in spec order (init containers first) still waiting for `kind`."""
    entries = sorted(pods.values(), key=lambda e: (not e.in_progress(), e.seq))
    for entry in entries:
        if entry.assignment is None or entry.failed:
            continue
        for container in entry.info.containers:
            if entry.ask(container, kind) > 0 and (container.name, kind) not in entry.admitted:
                if entry.shares.get(container.name):
                    yield entry, container
                break


def matching(
    pods: Entries, kind: UnitKind, size: int, gpus: frozenset[str] | None, *, pending: bool
) -> list[tuple[PodEntry, ContainerAsk]]:
    """Containers (at any position) asking `size` of `kind` on exactly `gpus` (any GPUs when
    None), not yet allocated `kind` when `pending`, else already allocated it."""
    out = []
    for entry in pods.values():
        for c in entry.info.containers:
            shares = entry.shares.get(c.name, ())
            on = frozenset(s.uuid for s in shares)
            if entry.ask(c, kind) != size or not shares or (gpus is not None and on != gpus):
                continue
            if ((c.name, kind) not in entry.admitted) == pending and not entry.failed:
                out.append((entry, c))
    return out


def describe_on(pods: Entries, wanted: set[str]) -> list[str]:
    """What the ledger holds on the `wanted` GPUs, one line per container, for refusals."""
    out = []
    for entry in sorted(pods.values(), key=lambda e: e.seq):
        for name, shares in entry.shares.items():
            if not wanted & {s.uuid for s in shares}:
                continue
            container = entry.info.container(name)
            state = "admitted" if container and entry.done(container) else "pending"
            asks = ", ".join(f"{s.cores} cores" for s in shares if s.uuid in wanted)
            blocks = container.memory_blocks if container else 0
            more = f" + {blocks} memory blocks" if blocks else ""
            out.append(f"{entry.info.key}/{name} ({state}, {asks}{more})")
    return out
