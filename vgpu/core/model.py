"""Frozen value types: GPUs, nodes, requests and assignments.

These are the nouns every layer speaks. They carry no behaviour beyond small derived properties;
decisions live in `fit`, `policy` (a package), `placement` and `gang`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from vgpu.core.ids import GangKey, GpuUUID, NodeName, PodKey
from vgpu.core.units import gpu_count, is_whole


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical GPU as the node inventory reports it."""

    uuid: GpuUUID
    index: int
    model: str
    memory_mib: int
    healthy: bool = True
    numa: int | None = None
    nvlink_peers: frozenset[GpuUUID] = frozenset()
    stale_cores: int = 0
    """Cores the kubelet still counts for pods gone from the node (inventory `kubeletStale`):
    taken until the node agent clears them (docs/handshake.md)."""
    stale_memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    """A schedulable node: CPU and host memory capacity plus its GPUs."""

    name: NodeName
    cpu_milli: int
    memory_mib: int
    gpus: tuple[Gpu, ...] = ()


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(t for t in re.split(r"[^0-9a-z]+", text.lower()) if t)


def model_matches(pattern: str, model: str) -> bool:
    """Whether a GPU-type pattern names this model.

    Matching is by whole tokens, case-insensitively: "A100" matches "NVIDIA A100-SXM4-80GB" but
    "A10" does not (a substring test would confuse the two).
    """
    want, have = _tokens(pattern), _tokens(model)
    if not want:
        return False
    n = len(want)
    return any(have[i : i + n] == want for i in range(len(have) - n + 1))


@dataclass(frozen=True, slots=True)
class GpuSelector:
    """Which GPUs a pod accepts: model include/exclude patterns and uuid include/exclude sets."""

    include_models: tuple[str, ...] = ()
    exclude_models: tuple[str, ...] = ()
    include_uuids: frozenset[GpuUUID] = frozenset()
    exclude_uuids: frozenset[GpuUUID] = frozenset()

    @property
    def is_any(self) -> bool:
        """True when the selector accepts every GPU."""
        return not (
            self.include_models or self.exclude_models or self.include_uuids or self.exclude_uuids
        )

    def allows_model(self, model: str) -> bool:
        """Whether a GPU of this model is acceptable (exclusion wins)."""
        if any(model_matches(p, model) for p in self.exclude_models):
            return False
        return not self.include_models or any(model_matches(p, model) for p in self.include_models)

    def allows(self, gpu: Gpu) -> bool:
        """Whether this GPU is acceptable (exclusion wins)."""
        if gpu.uuid in self.exclude_uuids:
            return False
        if self.include_uuids and gpu.uuid not in self.include_uuids:
            return False
        return self.allows_model(gpu.model)

    def describe(self) -> str:
        """A short human description, for reasons."""
        parts = []
        if self.include_models:
            parts.append("type " + "|".join(self.include_models))
        if self.exclude_models:
            parts.append("not " + "|".join(self.exclude_models))
        if self.include_uuids:
            parts.append(f"{len(self.include_uuids)} named GPU(s)")
        if self.exclude_uuids:
            parts.append(f"excluding {len(self.exclude_uuids)} GPU(s)")
        return ", ".join(parts) or "any GPU"


ANY_GPU = GpuSelector()


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """What one container asks of GPUs. `memory_mib` None means proportional to `cores`."""

    name: str
    cores: int = 0
    memory_mib: int | None = None

    @property
    def wants_gpu(self) -> bool:
        """Whether the container needs any GPU."""
        return self.cores > 0

    @property
    def whole(self) -> bool:
        """Whether the container takes whole GPUs exclusively."""
        return is_whole(self.cores)

    @property
    def gpus(self) -> int:
        """How many GPUs the container occupies."""
        return gpu_count(self.cores)


@dataclass(frozen=True, slots=True)
class GangRef:
    """Membership of a pod in a gang: its key and how many members must be placed together."""

    key: GangKey
    min_member: int


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What a pod asks for: CPU and host memory (as kube-scheduler counts them) and GPU shares.

    `containers` lists every container that needs a GPU share in the ledger (init containers are
    included conservatively: their share is held as if they ran beside the app containers).
    """

    key: PodKey
    cpu_milli: int = 0
    memory_mib: int = 0
    containers: tuple[ContainerRequest, ...] = ()
    selector: GpuSelector = ANY_GPU
    gang: GangRef | None = None
    uid: str = ""
    policy: str | None = None

    @property
    def gpu_containers(self) -> tuple[ContainerRequest, ...]:
        """The containers that need a GPU."""
        return tuple(c for c in self.containers if c.wants_gpu)

    @property
    def wants_gpu(self) -> bool:
        """Whether any container needs a GPU."""
        return any(c.wants_gpu for c in self.containers)

    @property
    def gpu_milli(self) -> int:
        """Total GPU compute asked, in milli-GPUs (1000 per whole GPU)."""
        return sum(c.cores * 10 for c in self.containers)

    @property
    def shape(self) -> tuple[object, ...]:
        """A hashable summary of everything placement depends on (not the pod's identity)."""
        return (
            self.cpu_milli,
            self.memory_mib,
            tuple((c.cores, c.memory_mib) for c in self.containers if c.wants_gpu),
            self.selector,
        )


@dataclass(frozen=True, slots=True)
class GpuShare:
    """A slice of one GPU held by a container: core units and memory (mMiB)."""

    uuid: GpuUUID
    cores: int
    memory_mmib: int


@dataclass(frozen=True, slots=True)
class ContainerAssignment:
    """The GPU shares one container holds."""

    name: str
    shares: tuple[GpuShare, ...]


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a pod was placed and exactly which GPU shares each container holds."""

    pod: PodKey
    node: NodeName
    cpu_milli: int = 0
    memory_mib: int = 0
    containers: tuple[ContainerAssignment, ...] = ()
    uid: str = ""
    reused: tuple[GpuShare, ...] = ()
    """Capacity named twice in `containers` but held once by the kubelet: devices of finished
    init containers that later containers of the pod reuse (`vgpu.core.kubelet_reuse`)."""

    @property
    def shares(self) -> tuple[GpuShare, ...]:
        """All shares of all containers."""
        return tuple(s for c in self.containers for s in c.shares)

    @property
    def charged(self) -> tuple[GpuShare, ...]:
        """What the pod really takes of each GPU: its shares less what the kubelet reuses."""
        if not self.reused:
            return self.shares
        total: dict[GpuUUID, list[int]] = {}
        for share, sign in [(s, 1) for s in self.shares] + [(s, -1) for s in self.reused]:
            acc = total.setdefault(share.uuid, [0, 0])
            acc[0] += sign * share.cores
            acc[1] += sign * share.memory_mmib
        return tuple(GpuShare(uuid, cores, mem) for uuid, (cores, mem) in total.items())

    @property
    def gpu_milli(self) -> int:
        """Total GPU compute held, in milli-GPUs."""
        return sum(s.cores * 10 for s in self.shares)


class Phase(Enum):
    """Where a holding is in its life: assumed by a scheduler, reserved for a gang, or bound."""

    RESERVED = "reserved"
    ASSUMED = "assumed"
    BOUND = "bound"


@dataclass(frozen=True, slots=True)
class Holding:
    """A ledger entry: an assignment, its phase, and for reservations a deadline and gang."""

    assignment: Assignment
    phase: Phase
    deadline: float | None = None
    gang: GangKey | None = None
    extra: tuple[tuple[str, str], ...] = field(default=())
