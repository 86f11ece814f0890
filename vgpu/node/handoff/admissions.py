"""The node's side of the hand-off (docs/handshake.md): which containers are pending and admitted.

`Handoff` is the agent's ledger of the pods bound to its node, fed by the pod watch
(`observe` / `forget`), by Allocate (`admit`) and by the kubelet's pod-resources API
(`reconcile`). For every pod it verifies the signed `vgpu.io/assignment` (HMAC, pod UID, pod
key, node, per-container cores): a pod without a valid one is *unassigned*. A container is
*pending* for a resource (cores or memory blocks) while it asks devices of that resource and
has not been allocated them; it is *admitted* once every resource it asks is allocated.

Matching is the heart of it: `candidates(kind, size, gpus)` lists the pending containers whose
ask for `kind` equals `size` and whose assignment names exactly `gpus`, ordered as the kubelet
admits them: a pod the kubelet is in the middle of first, then pods in the order they were
seen, and within a pod in spec order (init containers first). Invariant I guarantees that
containers of different pods left in that list would get the same grant; which of them a call
was for stays *unsure* until the kubelet's record says (`admit`, `attribution`, `reconcile`). Pure,
apart from a lock: the adapters call it from several threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

from vgpu.api.admitted import encode_admitted
from vgpu.api.assignment import ADMITTED
from vgpu.core.ids import PodKey
from vgpu.core.kubelet_reuse import Role
from vgpu.core.model import GpuShare
from vgpu.core.units import MMIB_PER_MIB
from vgpu.node.devices import UnitKind
from vgpu.node.handoff.entries import (
    KINDS,
    Attribution,
    Candidate,
    GrantedContainer,
    HeldDevices,
    PodEntry,
    Steering,
    check_assignment,
)
from vgpu.node.handoff.matching import describe_on, matching, pending_entries
from vgpu.node.handoff.reconcile import reconcile_entries
from vgpu.node.podspec import PodInfo, cores_limit

__all__ = [
    "KINDS",
    "Attribution",
    "Candidate",
    "GrantedContainer",
    "Handoff",
    "HeldDevices",
    "Steering",
    "check_assignment",
]


class Handoff:
    """Pending and admitted containers of the pods bound to one node. Thread-safe."""

    def __init__(
        self,
        node: str,
        key: bytes,
        *,
        clock: Callable[[], float],
        grace_s: float = 30.0,
    ) -> None:
        self.node = node
        self._key = key
        self._clock = clock
        self._grace_s = grace_s
        self._pods: dict[PodKey, PodEntry] = {}
        self._seq = 0
        self._patched: dict[PodKey, str] = {}
        self._lock = threading.RLock()
        self.unassigned_held: tuple[HeldDevices, ...] = ()

    # ----- the pod watch -----------------------------------------------------------------------
    def observe(self, info: PodInfo) -> str | None:
        """Record a pod bound to this node; returns why it is unassigned (None if assigned)."""
        with self._lock:
            old = self._pods.get(info.key)
            if not info.may_be_admitted or info.node != self.node or not info.asks:
                self._pods.pop(info.key, None)
                self._patched.pop(info.key, None)  # what was written belongs to that pod
                return None
            assignment, problem = check_assignment(info, self.node, self._key)
            if old is not None and old.info.uid == info.uid:
                entry = old
                entry.info, entry.assignment, entry.problem = info, assignment, problem
            else:  # a new pod, or a new one of the same name: nothing written to it yet
                self._patched.pop(info.key, None)
                self._seq += 1
                entry = PodEntry(info, assignment, problem, self._seq)
                self._pods[info.key] = entry
            entry.shares = {c.name: c.shares for c in assignment.containers} if assignment else {}
            return problem

    def forget(self, key: PodKey, uid: str = "") -> None:
        """Drop a deleted pod (only the incarnation with `uid`, when given)."""
        with self._lock:
            entry = self._pods.get(key)
            if entry is not None and (not uid or entry.info.uid == uid):
                del self._pods[key]
                self._patched.pop(key, None)

    def holds_devices(self, key: PodKey) -> bool:
        """Whether some container of the pod was allocated devices (sure or not)."""
        with self._lock:
            entry = self._pods.get(key)
            return entry is not None and bool(entry.admitted)

    def pods(self) -> list[PodKey]:
        with self._lock:
            return list(self._pods)

    def problem(self, key: PodKey) -> str | None:
        with self._lock:
            entry = self._pods.get(key)
            return entry.problem if entry else None

    # ----- matching ----------------------------------------------------------------------------
    def candidates(
        self, kind: UnitKind, size: int, gpus: frozenset[str] | None = None
    ) -> list[Candidate]:
        """Next pending containers asking `size` devices of `kind` (on exactly `gpus`, if
        given), at most one per pod, a pod the kubelet is in the middle of first."""
        with self._lock:
            out = []
            for entry, container in pending_entries(self._pods, kind):
                shares = entry.shares[container.name]
                if entry.ask(container, kind) != size:
                    continue
                if gpus is not None and frozenset(s.uuid for s in shares) != gpus:
                    continue
                limit = cores_limit(entry.info)
                after = entry.followers().get(container.name, "")
                out.append(
                    Candidate(
                        entry.info.key,
                        container,
                        shares,
                        limit,
                        entry.in_progress(),
                        after,
                        uid=entry.info.uid,
                    )
                )
            return out

    def admit(
        self,
        pod: PodKey,
        container: str,
        kind: UnitKind,
        ids: Sequence[str],
        *,
        unsure: bool = False,
    ) -> None:
        """Record an allocation. `unsure`: interchangeable containers of other pods could have
        been the caller (the grant is the same, the attribution may not be): the container is
        not reported admitted until the kubelet's record (`reconcile`) settles it. A pod with
        an unsure attribution gets its later calls matched because of it, so they are unsure
        too (identical gang members on one GPU swap whole sequences of calls)."""
        with self._lock:
            entry = self._pods.get(pod)
            if entry is not None:
                entry.admitted[(container, kind)] = (tuple(ids), self._clock())
                if unsure or entry.unsure:
                    entry.unsure.add((container, kind))

    def attribution(self, kind: UnitKind, size: int, gpus: frozenset[str]) -> Attribution:
        """What an Allocate of `size` devices of `kind` on `gpus` is judged on, in one hold of
        the lock (`Attribution`). With no pending container there and no unassigned pod waiting
        with that ask, an unsure attribution there may be taken back: it took the caller's
        container for another pod's call, and this call is that container's own (the kubelet
        allocates a container once); which one it was stays unsure until the kubelet's record
        says (`reconcile`)."""
        with self._lock:
            pending = self.candidates(kind, size, gpus)
            unassigned = self._waiting_unassigned(kind, size)
            taken_back = None if pending or unassigned else self._taken_back(kind, size, gpus)
            chosen = pending[0] if pending else taken_back
            return Attribution(
                pending[0] if pending else None,
                taken_back,
                chosen is not None and self._others_waiting(kind, size, gpus, chosen.pod),
                tuple(self.candidates(kind, size)),
                tuple(unassigned),
                tuple(describe_on(self._pods, set(gpus))),
            )

    def _waiting_unassigned(self, kind: UnitKind, size: int) -> list[PodKey]:
        """Unassigned pods not yet started that ask `size` devices of `kind` somewhere: an
        Allocate of that size could be theirs, whatever IDs it carries."""
        holders = {h.pod for h in self.unassigned_held}
        return [
            key
            for key, e in self._pods.items()
            if e.assignment is None
            and e.info.phase in ("", "Pending")
            and key not in holders
            and any(e.ask(c, kind) == size for c in e.info.containers)
        ]

    def _taken_back(self, kind: UnitKind, size: int, gpus: frozenset[str]) -> Candidate | None:
        """An unsure attribution asking `size` of `kind` on `gpus`, which a call matching no
        pending container may take back."""
        for entry, container in matching(self._pods, kind, size, gpus, pending=False):
            if (container.name, kind) in entry.unsure:
                shares = entry.shares[container.name]
                return Candidate(
                    entry.info.key, container, shares, cores_limit(entry.info), uid=entry.info.uid
                )
        return None

    def _others_waiting(self, kind: UnitKind, size: int, gpus: frozenset[str], pod: PodKey) -> bool:
        """Whether another pod than `pod` may still wait with a container asking `size` of
        `kind` on `gpus` (`_waiting`)."""
        return any(e.info.key != pod for e in self._waiting(kind, size, gpus))

    def _waiting(self, kind: UnitKind, size: int, gpus: frozenset[str]) -> list[PodEntry]:
        """The pods that may still wait with a container asking `size` of `kind` on `gpus`: one
        not yet allocated (at any position: after an unsure attribution a pod's calls come at
        other positions than the ledger expects) or unsurely allocated."""
        waiting = [e for e, _ in matching(self._pods, kind, size, gpus, pending=True)]
        waiting += [
            e
            for e, c in matching(self._pods, kind, size, gpus, pending=False)
            if (c.name, kind) in e.unsure
        ]
        return waiting

    def has_unsure(self) -> bool:
        """Whether some attribution waits for the kubelet's record (reconcile soon)."""
        with self._lock:
            return any(e.unsure for e in self._pods.values())

    def steering(self, kind: UnitKind, size: int) -> Steering:
        """Where a GetPreferredAllocation of `size` devices of `kind` may steer, in one hold of
        the lock (`Steering`): the pending containers asking that, and with none, the unsure
        attributions asking that, where a call matching no pending container may still belong
        (`attribution`)."""
        with self._lock:
            pending = tuple(self.candidates(kind, size))
            return Steering(pending, () if pending else tuple(self._unsure(kind, size)))

    def _unsure(self, kind: UnitKind, size: int) -> list[Candidate]:
        """Unsure attributions asking `size` of `kind`, on any GPUs."""
        return [
            Candidate(e.info.key, c, e.shares[c.name], cores_limit(e.info), uid=e.info.uid)
            for e, c in matching(self._pods, kind, size, None, pending=False)
            if (c.name, kind) in e.unsure
        ]

    def abort_admissions(self, kind: UnitKind, size: int) -> list[PodKey]:
        """An Allocate of `size` devices of `kind` was refused: the kubelet fails the pod it was
        admitting (the first error fails the pod, which is not admitted again on this node:
        pkg/kubelet/cm/devicemanager/manager.go, pkg/kubelet/cm/admission/errors.go). A pod
        part-way through admission whose next container asks exactly that was the caller, or
        its admission already failed elsewhere: either way it is never allocated again here and
        must not absorb another pod's Allocate. (A pod whose next container asks something else
        was not the caller; after a kubelet restart it may still be admitted. A pod whose
        progress rests on an unsure attribution may owe it to another pod's calls.)"""
        with self._lock:
            aborted = [
                e.info.key
                for e, c in pending_entries(self._pods, kind)
                if e.in_progress() and not e.unsure and e.ask(c, kind) == size
            ]
            for key in aborted:
                self._pods[key].failed = True
            return aborted

    def unadmit(self, pod: PodKey, container: str, kind: UnitKind) -> None:
        with self._lock:
            entry = self._pods.get(pod)
            if entry is not None:
                entry.admitted.pop((container, kind), None)
                entry.unsure.discard((container, kind))

    def reserved(self, gpu: str, kind: UnitKind, memory_unit_mib: int) -> int:
        """Units of `kind` on `gpu` that assigned pods (pending or admitted) or unassigned
        holders take, in devices (memory rounded up to blocks)."""
        with self._lock:
            total = 0
            for entry in self._pods.values():
                charged = entry.assignment.charged if entry.assignment else ()
                for share in charged:
                    if share.uuid != gpu:
                        continue
                    if kind is UnitKind.CORES:
                        total += share.cores
                    else:
                        total += -(-share.memory_mmib // (memory_unit_mib * MMIB_PER_MIB))
            held = (h for h in self.unassigned_held if h.kind is kind)
            total += sum(sum(1 for i in h.ids if i.startswith(gpu + "::")) for h in held)
            return total

    def granted(self) -> list[GrantedContainer]:
        """Every container of an assigned pod (pending or admitted) with its shares."""
        with self._lock:
            out = []
            for key, entry in self._pods.items():
                for name, shares in entry.shares.items():
                    container = entry.info.container(name)
                    done = container is not None and entry.done(container)
                    out.append(GrantedContainer(key, entry.info.uid, name, shares, done))
            return out

    def pods_holding(
        self, kind: UnitKind, ids: Sequence[str]
    ) -> list[tuple[str, list[tuple[Role, tuple[GpuShare, ...]]]]]:
        """The UIDs and containers (role, shares) of the pods whose container may have been
        allocated exactly `ids` of `kind` (none: no pod holds them): how `PreStartContainer`,
        which names only device IDs, finds the pods whose cgroups the driver's memory limit
        goes on. One pod when the attribution is sure; while it is unsure (`admit`), also every
        other pod whose interchangeable container may have been the caller, since the kubelet
        may have admitted any of them first (their limits are each their own grant). Every pod
        recorded with exactly `ids` counts, not only the first: the kubelet frees a finished
        pod's devices at its next Allocate and may give them to another pod before the watch
        shows the first one finished (or before a reconcile drops its record)."""
        wanted = set(ids)
        with self._lock:
            found: dict[int, PodEntry] = {}
            for entry in self._pods.values():
                for (name, k), (held, _) in entry.admitted.items():
                    if k is kind and set(held) == wanted:
                        for e in self._maybe_caller(entry, name, kind):
                            found.setdefault(id(e), e)
            return [_holder(e) for e in found.values()]

    def _maybe_caller(self, entry: PodEntry, name: str, kind: UnitKind) -> list[PodEntry]:
        """The pod recorded for container `name`'s allocation of `kind`, then, while that
        attribution is unsure, the other pods that may still wait with its ask (`_waiting`)."""
        container = entry.info.container(name)
        if (name, kind) not in entry.unsure or container is None:
            return [entry]
        gpus = frozenset(s.uuid for s in entry.shares.get(name, ()))
        others = self._waiting(kind, entry.ask(container, kind), gpus)
        return [entry, *{id(e): e for e in others if e is not entry}.values()]

    # ----- the admitted annotation ---------------------------------------------------------------
    def admitted_containers(self, key: PodKey) -> list[str]:
        with self._lock:
            entry = self._pods.get(key)
            if entry is None or entry.assignment is None:
                return []
            unsure = {name for name, _ in entry.unsure}
            return sorted(
                c.name for c in entry.info.containers if entry.done(c) and c.name not in unsure
            )

    def annotation_updates(self) -> list[tuple[PodKey, str]]:
        """(pod, new `vgpu.io/admitted` value) for pods whose annotation is out of date."""
        with self._lock:
            out = []
            for key, entry in self._pods.items():
                if entry.assignment is None:
                    continue
                names = self.admitted_containers(key)
                value = encode_admitted(names)
                current = entry.info.annotations.get(ADMITTED, "[]")
                if value != current and self._patched.get(key) != value:
                    out.append((key, value))
            return out

    def patched(self, key: PodKey, value: str) -> None:
        with self._lock:
            self._patched[key] = value

    # ----- reconciliation ------------------------------------------------------------------------
    def reconcile(
        self, held: Iterable[HeldDevices], checkpointed: Iterable[HeldDevices] = ()
    ) -> list[tuple[PodKey, str]]:
        """Rebuild the admitted set from what the kubelet says running containers hold (`held`,
        its pod-resources List) and, where the caller can read the kubelet's device checkpoint,
        what its regular init containers hold (`checkpointed`: the only record of them while
        their pod is part-way through admission).

        Returns (pod, message) for containers holding IDs that differ from their assignment and
        for unassigned pods holding devices (`vgpu.node.handoff.reconcile`).
        """
        with self._lock:
            reports, self.unassigned_held = reconcile_entries(
                self._pods, held, self._clock(), self._grace_s, checkpointed
            )
        return reports


def _holder(entry: PodEntry) -> tuple[str, list[tuple[Role, tuple[GpuShare, ...]]]]:
    """A pod's UID and its containers' roles and shares."""
    return entry.info.uid, [(c.role, entry.shares.get(c.name, ())) for c in entry.info.containers]
