"""What the gang coordinators may use of the extender's cache, and nothing more.

`GangCoordinator` (`vgpu.extender.gangs.coordinator`) and `ClaimGangs`
(`vgpu.extender.gangs.claims`) are parts of `ClusterCache`, which makes them and shares its lock
with them; they read its pods, members and ledger and change the ledger only through the few
operations named here. Typing them against this Protocol instead of the cache keeps the cache's
import of them one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Protocol

from vgpu.api.nodefit import NodeFacts
from vgpu.api.podspec import PodSpec
from vgpu.core import gang as gang_planning
from vgpu.core.ids import GangKey, PodKey
from vgpu.core.model import Holding
from vgpu.extender.ledger_view import LedgerView


class GangCache(Protocol):
    """The cache as the gang coordinators see it (`ClusterCache` is one)."""

    @property
    def ledger(self) -> LedgerView:
        """Every pod's holding (read-only)."""
        ...

    @property
    def pods(self) -> Mapping[PodKey, PodSpec]:
        """Watched pods by key, parsed."""
        ...

    @property
    def members(self) -> Mapping[GangKey, AbstractSet[PodKey]]:
        """Watched gang members by gang."""
        ...

    @property
    def node_facts(self) -> Mapping[str, NodeFacts]:
        """Each watched node's labels and hard taints (`vgpu.api.nodefit`), by name."""
        ...

    @property
    def invalid(self) -> Mapping[PodKey, str]:
        """Watched pods that cannot be read, and why."""
        ...

    def holding(self, key: PodKey) -> Holding | None:
        """What the ledger holds for a pod."""
        ...

    def release(self, key: PodKey) -> None:
        """Give a pod's holding back, whatever its phase."""
        ...

    def reserve_gang(self, plan: gang_planning.GangPlan, deadline: float) -> None:
        """Hold every member's place of a planned gang until `deadline` (all or nothing)."""
        ...

    def release_gang(self, gang: GangKey) -> list[PodKey]:
        """Give back every reservation of a gang; the released pods."""
        ...

    def extend_reservation(self, key: PodKey, deadline: float) -> None:
        """Move a reservation's deadline."""
        ...
