"""The read-only views other modules get of the extender cache's state.

`ClusterCache` (`vgpu.extender.cache.cluster`) owns the state and its lock. Other modules read the
state through its view properties, inside `ClusterCache.atomic()`, and never change it: the mappings
are typed read-only, the ledger is a `LedgerView` and the change feed a `FeedView`
(`vgpu.extender.answers`).
"""

from __future__ import annotations

from typing import Protocol

from vgpu.core.ids import NodeName, PodKey
from vgpu.core.model import Holding


class LedgerView(Protocol):
    """What other modules may ask the ledger; they change it through `ClusterCache` only."""

    def holding(self, pod: PodKey) -> Holding | None: ...

    def holdings(self) -> list[Holding]: ...

    def on_node(self, node: NodeName) -> list[Holding]: ...

    def expired(self, now: float) -> list[Holding]: ...
