"""The report's values: per GPU who holds what, per node and cluster totals, gangs, problems.

Frozen dataclasses, built by `vgpu.inspect.build` and read by the renderers. Memory is kept in
mMiB (1/1000 MiB) like the core so that proportional shares add up exactly; renderers round.
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.core.units import MMIB_PER_MIB
from vgpu.inspect.gangs import GangView
from vgpu.inspect.lease import ExtenderStatus
from vgpu.inspect.real_use import GpuUse, RealUse


@dataclass(frozen=True, slots=True)
class Holder:
    """One container's share of one GPU; `admitted` False means bound but not yet allocated."""

    pod: str
    container: str
    cores: int
    memory_mmib: int
    admitted: bool


@dataclass(frozen=True, slots=True)
class GpuView:
    index: int
    uuid: str
    model: str
    healthy: bool
    cores_total: int
    memory_mib: int
    holders: tuple[Holder, ...]

    @property
    def cores_used(self) -> int:
        return sum(h.cores for h in self.holders)

    @property
    def memory_used_mmib(self) -> int:
        return sum(h.memory_mmib for h in self.holders)


@dataclass(frozen=True, slots=True)
class Usage:
    """Sums over some GPUs. `pending_*` is the part held by containers not yet admitted."""

    gpus: int = 0
    unhealthy: int = 0
    cores_used: int = 0
    cores_total: int = 0
    memory_used_mmib: int = 0
    memory_total_mib: int = 0
    pending_pods: int = 0
    pending_cores: int = 0
    pending_memory_mmib: int = 0

    @property
    def cores_percent(self) -> float:
        return 100.0 * self.cores_used / self.cores_total if self.cores_total else 0.0

    @property
    def memory_percent(self) -> float:
        total = self.memory_total_mib * MMIB_PER_MIB
        return 100.0 * self.memory_used_mmib / total if total else 0.0

    def plus(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    address: str
    ready: bool
    gpus: tuple[GpuView, ...]
    usage: Usage
    mode: str = ""
    """"dra" for a node whose GPUs a DRA driver publishes; "" for device-plugin mode."""
    memory_backend: str = ""
    """What holds memory grants there, from the agent's `gpu.memory-backend` label: "driver"
    (the driver's per-cgroup limits), else the agent's `--mode`; "" when not labelled."""

    @property
    def models(self) -> tuple[str, ...]:
        """Distinct GPU models in index order."""
        return tuple(dict.fromkeys(g.model for g in self.gpus))


@dataclass(frozen=True, slots=True)
class Unscheduled:
    """A live pod that asks for vgpu resources and is bound to no node yet."""

    pod: str
    cores: int
    memory_blocks: int
    gang: str
    reason: str = ""
    """The scheduler's or the extender's last word on it (`vgpu.inspect.waiting`)."""

    @property
    def memory(self) -> str:
        """Its memory ask as shown: "auto" when its cores bring their share of memory (a
        memory ask of 0 with cores is no ask of nothing)."""
        return "auto" if self.cores and not self.memory_blocks else str(self.memory_blocks)


@dataclass(frozen=True, slots=True)
class Problem:
    """Something an operator should look at; `subject` is a node or `ns/pod`."""

    subject: str
    message: str
    node: str = ""
    """The node concerned, when there is one (used to filter the report by node)."""


@dataclass(frozen=True, slots=True)
class Report:
    nodes: tuple[NodeView, ...]
    without_vgpu: tuple[str, ...]
    totals: Usage
    gangs: tuple[GangView, ...]
    unscheduled: tuple[Unscheduled, ...]
    problems: tuple[Problem, ...]
    taken_at: str = ""
    extender: ExtenderStatus | None = None
    """Whether the extender is up, when its Lease was looked for (`vgpu.inspect.lease`)."""
    real_use: RealUse | None = None
    """The GPUs' real use, when asked for (`--prometheus`; `vgpu.inspect.real_use`)."""

    def use_of(self, gpu: GpuView) -> GpuUse | None:
        """A GPU's real use (None: not asked, or no figure for it)."""
        return None if self.real_use is None else self.real_use.gpus.get(gpu.uuid)
