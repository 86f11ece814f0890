"""What the leader's queue pass may use of the extender, and nothing more.

The pass (`vgpu.extender.queues.release_pass`) reads the watched pods and the nodes' free capacity
and holds places for the jobs it releases, under the cache's lock one job at a time. Typed against
the whole `Extender` it could reach any verb's state; typed against `QueueCache` (the eight members
of the cache it uses; `ClusterCache` is one) and `QueueParts` (the cache with the scheduler, the
clock, the settings and the gang sizes) it reaches what the pass needs, as the gang coordinators
reach the cache through `GangCache`. `Extender.queue_parts` builds the parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from vgpu.api.nodefit import NodeFacts
from vgpu.api.podspec import PodSpec
from vgpu.core import gang as gang_planning
from vgpu.core.ids import PodKey
from vgpu.core.model import Holding
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import NodeState
from vgpu.extender.config import ExtenderConfig
from vgpu.extender.gangs.coordinator import GangCoordinator


class QueueCache(Protocol):
    """The cache as the queue pass sees it (`ClusterCache` is one)."""

    def atomic(self) -> AbstractContextManager[None]:
        """The cache's lock, for reads and a job's placement."""
        ...

    def parse(self, obj: dict[str, Any]) -> PodSpec:
        """A pod parsed as the watch parses it (raises `InvalidRequest`)."""
        ...

    def pod(self, key: PodKey) -> PodSpec | None:
        """The pod as the watch shows it."""
        ...

    def holding(self, key: PodKey) -> Holding | None:
        """What the ledger holds for a pod."""
        ...

    @property
    def node_states(self) -> Mapping[str, NodeState]:
        """Node states by name (read inside `atomic()`)."""
        ...

    @property
    def node_facts(self) -> Mapping[str, NodeFacts]:
        """Each node's labels and hard taints (`vgpu.api.nodefit`; read inside `atomic()`)."""
        ...

    @property
    def gangs(self) -> GangCoordinator:
        """The gang reservations: a released gang's place is held there."""
        ...

    def reserve_gang(self, plan: gang_planning.GangPlan, deadline: float) -> None:
        """Hold every member's place of a planned gang until `deadline`."""
        ...

    def without(self, gone: Iterable[PodKey]) -> AbstractContextManager[None]:
        """Reclaim's what-if: the state as if the `gone` pods' holdings were released."""
        ...


@dataclass(frozen=True, slots=True)
class QueueParts:
    """The queue pass's view of the extender (module doc)."""

    cache: QueueCache
    scheduler: Callable[[], Scheduler]
    """The scheduler over the cache's current state (rebuilt with it, so asked each time)."""
    clock: Callable[[], float]
    """Monotonic time, for the held places' deadlines."""
    config: ExtenderConfig
    """Read for `schedulers`, `memory_unit_mib` and `gang_timeout`."""
    gang_size: Callable[[PodSpec], int]
    """A gang member's gang size, as the verbs resolve it (raises `InvalidRequest`)."""
