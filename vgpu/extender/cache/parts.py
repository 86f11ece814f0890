"""The extender's state and its lock, as the cache's roles share them.

`ClusterCache` (`vgpu.extender.cache.cluster`) is the one owner of this object and the facade every
other module goes through; the watch intake (`vgpu.extender.cache.intake`) is the role that changes
it from watch events and rebuilds it from a listing. Both reach the parts through here, never by
holding one, because a rebuild (`reset`) replaces the state whole: the change feed, the cluster
state and ledger over it, the node table and the pod book. The lock, the condition binds wait
on, the bind holds and the pod parser outlive a rebuild (binds in flight still finish, and a
pod's parse does not depend on the state).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

from vgpu.api.nodefit import NodeFacts
from vgpu.api.resources import ResourceNames
from vgpu.core.changes import ChangeFeed
from vgpu.core.ledger import Ledger
from vgpu.core.state import ClusterState
from vgpu.extender.bind_holds import BindHolds
from vgpu.extender.node_table import NodeTable
from vgpu.extender.pods.book import PodBook
from vgpu.extender.pods.parser import PodParser

Obj = dict[str, Any]
InvalidHook = Callable[[Obj, str], None]
"""(the pod object, what is wrong with it): a watched pod the cache skipped."""


class CacheParts:
    """The state and its lock (module doc); every field is read and changed under `lock`."""

    def __init__(
        self,
        *,
        key: bytes,
        memory_unit_mib: int,
        names: ResourceNames,
        feed_limit: int,
        schedulers: AbstractSet[str],
    ) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        """Notified on every pod event and gang step: binds waiting for a gang wake on it."""
        self.names = names
        self.parser = PodParser(memory_unit_mib, names)
        self.binds = BindHolds()
        self.on_invalid: InvalidHook = lambda pod, problem: None
        self._key = key
        self._feed_limit = feed_limit
        self.schedulers = schedulers
        """The pods' schedulers the extender serves: only their pods are gang members."""
        self.reset()

    def reset(self) -> None:
        """A fresh, empty state (start-up, rebuild)."""
        self.feed = ChangeFeed(limit=self._feed_limit)
        self.state = ClusterState(feed=self.feed)
        self.ledger = Ledger(self.state)
        self.table = NodeTable(self.state, self.feed)
        self.node_facts: dict[str, NodeFacts] = {}
        """Each watched node's labels and hard taints (`vgpu.api.nodefit`), for the places
        made without kube-scheduler's filters: the queue pass's and a gang's members'."""
        self.book = PodBook(
            self.state, self.ledger, self.feed, self._key, schedulers=self.schedulers
        )
