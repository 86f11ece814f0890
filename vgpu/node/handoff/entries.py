"""The values of the node's hand-off ledger (`vgpu.node.handoff.admissions`): what the kubelet
says a container holds, the containers of assigned pods, an Allocate's candidates and its
attribution, a pod's ledger entry, and the verification of a pod's signed assignment. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from vgpu.api.assignment import ASSIGNMENT, verify
from vgpu.core.handoff_rule import PendingContainer, asks_of, followers
from vgpu.core.ids import PodKey
from vgpu.core.model import Assignment, GpuShare
from vgpu.node.devices import UnitKind
from vgpu.node.podspec import ContainerAsk, PodInfo

KINDS = (UnitKind.CORES, UnitKind.MEMORY)


@dataclass(frozen=True, slots=True)
class HeldDevices:
    """Device IDs of one resource that a running container holds, per the kubelet."""

    pod: PodKey
    container: str
    kind: UnitKind
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GrantedContainer:
    """A container of an assigned pod with its shares; `admitted` once it holds its devices."""

    pod: PodKey
    uid: str
    container: str
    shares: tuple[GpuShare, ...]
    admitted: bool


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pending container that an Allocate call could be for."""

    pod: PodKey
    container: ContainerAsk
    shares: tuple[GpuShare, ...]
    cores_limit: tuple[int | None, str | None]  # (value, problem) of vgpu.io/cores-limit
    in_progress: bool = False  # some of the pod's containers are admitted, not all
    after: str = ""  # a digest of the grants of the pod's later containers (`followers`)
    uid: str = ""  # the pod's UID

    @property
    def gpus(self) -> frozenset[str]:
        return frozenset(s.uuid for s in self.shares)

    @property
    def pending(self) -> PendingContainer:
        """The container as the hand-off rule (`vgpu.core.handoff_rule`) sees it."""
        c = self.container
        asks = asks_of(c.cores, c.memory_blocks)
        return PendingContainer(
            self.pod, c.name, asks, self.shares, self.cores_limit[0], self.after
        )


@dataclass(frozen=True, slots=True)
class Attribution:
    """The ledger's one answer to an Allocate of `size` devices of `kind` on `gpus`
    (`Handoff.attribution`), read in one hold of its lock: the watch cannot change the
    ledger between the parts the policy judges the call on."""

    pending: Candidate | None  # the first pending container asking that there
    taken_back: Candidate | None  # with none pending: an unsure attribution the call may undo
    unsure: bool  # another pod may still wait with that ask there: the attribution is unsure
    waiting: tuple[Candidate, ...]  # the pending containers asking `size` of `kind`, any GPUs
    unassigned: tuple[PodKey, ...]  # unassigned pods not yet started with that ask somewhere
    held_there: tuple[str, ...]  # what the ledger holds on `gpus`, for a refusal

    @property
    def chosen(self) -> Candidate | None:
        """The container the call is attributed to, if any."""
        return self.pending or self.taken_back

    @property
    def sure_start(self) -> bool:
        """Whether the call would surely start a pod's admission: a pending container of a pod
        not yet part-way through admission, with no other pod waiting with that ask there."""
        return self.pending is not None and not self.pending.in_progress and not self.unsure


@dataclass(frozen=True, slots=True)
class Steering:
    """The ledger's one answer to a GetPreferredAllocation of `size` devices of `kind`
    (`Handoff.steering`), read in one hold of its lock: what is pending and what is unsure
    come from the same state of the ledger."""

    pending: tuple[Candidate, ...]  # pending containers asking that (`Handoff.candidates`)
    unsure: tuple[Candidate, ...]  # with none pending: unsure attributions asking that

    @property
    def tried(self) -> tuple[Candidate, ...]:
        """Where the call may be steered, in order: the pending containers, or with none, the
        unsure attributions (the call may be that container's own: `Handoff.attribution`)."""
        return self.pending or self.unsure


@dataclass(slots=True)
class PodEntry:
    """One pod in the ledger: what the watch shows, its verified assignment, what is admitted."""

    info: PodInfo
    assignment: Assignment | None
    problem: str | None
    seq: int
    shares: dict[str, tuple[GpuShare, ...]] = field(default_factory=dict)
    admitted: dict[tuple[str, UnitKind], tuple[tuple[str, ...], float]] = field(
        default_factory=dict
    )
    failed: bool = False  # the kubelet gave up admitting it (an Allocate of it was refused)
    unsure: set[tuple[str, UnitKind]] = field(default_factory=set)  # see `Handoff.admit`

    def ask(self, container: ContainerAsk, kind: UnitKind) -> int:
        return container.cores if kind is UnitKind.CORES else container.memory_blocks

    def done(self, container: ContainerAsk) -> bool:
        return all(
            (container.name, k) in self.admitted for k in KINDS if self.ask(container, k) > 0
        )

    def followers(self) -> dict[str, str]:
        """Per container, the grants of the pod's later vGPU containers (the hand-off rule)."""
        held = [c for c in self.info.containers if self.shares.get(c.name)]
        return followers(
            (c.name, self.shares[c.name], asks_of(c.cores, c.memory_blocks)) for c in held
        )

    def in_progress(self) -> bool:
        started = any(self.admitted)
        return started and not all(self.done(c) for c in self.info.containers)


def check_assignment(info: PodInfo, node: str, key: bytes) -> tuple[Assignment | None, str | None]:
    """The pod's verified assignment, or None and why the pod is unassigned."""
    if ASSIGNMENT not in info.annotations:
        return None, f"{info.key} has no {ASSIGNMENT} (bound without the vgpu scheduler?)"
    assignment = verify(info.annotations, key)
    if assignment is None:
        return None, f"{info.key}: {ASSIGNMENT} is forged or signed with another key"
    if assignment.uid != info.uid:
        return None, (
            f"{info.key}: {ASSIGNMENT} belongs to pod UID {assignment.uid}, not {info.uid} "
            "(copied from another pod)"
        )
    if assignment.pod != info.key or assignment.node != node:
        return None, (
            f"{info.key}: {ASSIGNMENT} is for {assignment.pod} on {assignment.node}, "
            f"not {info.key} on {node}"
        )
    for ask in info.containers:
        held = next((c for c in assignment.containers if c.name == ask.name), None)
        cores = sum(s.cores for s in held.shares) if held else 0
        if cores != ask.cores:
            return None, (
                f"{info.key}: container {ask.name} asks {ask.cores} cores but its assignment "
                f"gives {cores}"
            )
    return assignment, None
