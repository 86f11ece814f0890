"""The extender cache's fields and the read-only views other modules get of them.

`ClusterCache` (`vgpu.extender.cache`) owns the state and its lock; its operations live in
`vgpu.extender.cacheops`. Other modules read the state through these views, inside
`ClusterCache.atomic()`, and never change it: the mappings are typed read-only, the ledger is a
`LedgerView` and the change feed a `FeedView`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Protocol

from vgpu.core.changes import ChangeFeed
from vgpu.core.handoff_rule import PendingContainer
from vgpu.core.ids import GangKey, NodeName, PodKey
from vgpu.core.ledger import Ledger
from vgpu.core.model import Assignment, Holding, Node
from vgpu.core.scheduler import Scheduler
from vgpu.core.state import ClusterState, NodeState
from vgpu.extender.answers import FeedView
from vgpu.extender.claimgangs import ClaimGangs
from vgpu.extender.gangs import GangCoordinator
from vgpu.extender.podspec import PodSpec


class LedgerView(Protocol):
    """What other modules may ask the ledger; they change it through `ClusterCache` only."""

    def holding(self, pod: PodKey) -> Holding | None: ...

    def holdings(self) -> list[Holding]: ...

    def on_node(self, node: NodeName) -> list[Holding]: ...

    def expired(self, now: float) -> list[Holding]: ...


class CacheFields:
    """The fields of the cache (set by `ClusterCache`), and read-only views of them."""

    _lock: threading.RLock
    _changed: threading.Condition
    _feed: ChangeFeed
    _state: ClusterState
    _gangs: GangCoordinator
    _claim_gangs: ClaimGangs
    _scheduler: Scheduler | None
    _ledger: Ledger
    _nodes: dict[NodeName, Node]
    _node_states: dict[str, NodeState]
    _problems: dict[NodeName, str]
    _pods: dict[PodKey, PodSpec]
    _invalid: dict[PodKey, str]
    _unheld: dict[PodKey, Assignment]
    _pending: dict[NodeName, dict[PodKey, list[PendingContainer]]]
    _members: dict[GangKey, set[PodKey]]
    _binding: set[PodKey]
    _assumed_at: dict[PodKey, float]
    _picked_at: dict[PodKey, float]

    # -- read-only views (callers read them inside `atomic()`) ---------------------------------
    @property
    def feed(self) -> FeedView:
        """Names every node whose answers may have changed: its state, its pending containers,
        its problem (read by the verbs' views, `vgpu.extender.answers`)."""
        return self._feed

    @property
    def gangs(self) -> GangCoordinator:
        """The gang reservations (their operations take this cache's lock)."""
        return self._gangs

    @property
    def ledger(self) -> LedgerView:
        """Every pod's holding (assumed, reserved, bound)."""
        return self._ledger

    @property
    def nodes(self) -> Mapping[NodeName, Node]:
        """Known nodes as last read from the watch."""
        return self._nodes

    @property
    def node_states(self) -> Mapping[str, NodeState]:
        """Node states by name, for the per-node hot loops (kept in step with `state`)."""
        return self._node_states

    @property
    def problems(self) -> Mapping[NodeName, str]:
        """Why a node offers no GPU (no or unreadable inventory), by node."""
        return self._problems

    @property
    def pods(self) -> Mapping[PodKey, PodSpec]:
        """Watched pods by key, parsed."""
        return self._pods

    @property
    def invalid(self) -> Mapping[PodKey, str]:
        """Watched pods that cannot be read, and why (they hold nothing)."""
        return self._invalid

    @property
    def unheld(self) -> Mapping[PodKey, Assignment]:
        """Bound pods that cannot be counted yet (their node is unknown or too small)."""
        return self._unheld

    @property
    def pending(self) -> Mapping[NodeName, Mapping[PodKey, Sequence[PendingContainer]]]:
        """Containers bound and not admitted, by node and pod (invariant I)."""
        return self._pending

    @property
    def members(self) -> Mapping[GangKey, AbstractSet[PodKey]]:
        """Watched gang members by gang."""
        return self._members
