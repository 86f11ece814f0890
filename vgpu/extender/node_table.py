"""The cache's node table: every watched node as the scheduler counts it, and why a node offers
no GPU.

A part of `ClusterCache` (`vgpu.extender.cache.cluster`), which makes a new one on every rebuild and
calls it under its lock. It keeps the `ClusterState`'s nodes in step with the node watch and
marks the change feed whenever a node's answers may change (its state or its problem), so the
verbs' answer sets (`vgpu.extender.answers`) recompute only those nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from vgpu.api.nodespec import NodeSpec
from vgpu.core.changes import ChangeFeed
from vgpu.core.ids import NodeName
from vgpu.core.model import Node
from vgpu.core.state import ClusterState, NodeState


class NodeTable:
    """Known nodes, their states and problems, fed one watch event at a time."""

    def __init__(self, state: ClusterState, feed: ChangeFeed) -> None:
        self._state = state
        self._feed = feed
        self._nodes: dict[NodeName, Node] = {}
        self._node_states: dict[str, NodeState] = {}
        self._problems: dict[NodeName, str] = {}
        self._unreadable: set[NodeName] = set()
        self._kubelet_holds: set[NodeName] = set()

    def apply(self, kind: str, spec: NodeSpec) -> bool:
        """Apply one node watch event (ADDED/MODIFIED upsert, DELETED forget). True when the
        node's capacity was (re)counted, so bound pods not yet counted there may fit now."""
        name = spec.node.name
        if spec.unreadable and kind != "DELETED":
            self._unreadable.add(name)
        else:
            self._unreadable.discard(name)
        if kind == "DELETED":
            self._feed.mark(name)
            self._state.remove_node(name)
            self._nodes.pop(name, None)
            self._node_states.pop(name, None)
            self._problems.pop(name, None)
            self._kubelet_holds.discard(name)
            return False
        if any(g.stale_cores or g.stale_memory_mib for g in spec.node.gpus):
            self._kubelet_holds.add(name)
        else:
            self._kubelet_holds.discard(name)
        if self._problems.get(name) != (spec.problem or None):
            self._feed.mark(name)
        if spec.problem:
            self._problems[name] = spec.problem
        else:
            self._problems.pop(name, None)
        if self._nodes.get(name) == spec.node:
            return False  # status heartbeats: nothing the scheduler counts changed
        self._nodes[name] = spec.node
        self._state.add_node(spec.node)
        self._node_states[name] = self._state.node(name)
        return True

    def unreadable_count(self) -> int:
        """Nodes with an unreadable inventory or allocatable (for the unreadable-objects gauge)."""
        return len(self._unreadable)

    @property
    def nodes(self) -> Mapping[NodeName, Node]:
        """Known nodes as last read from the watch."""
        return self._nodes

    @property
    def node_states(self) -> Mapping[str, NodeState]:
        """Node states by name, for the per-node hot loops (kept in step with the state)."""
        return self._node_states

    @property
    def kubelet_holds(self) -> AbstractSet[NodeName]:
        """Nodes whose kubelet still holds devices for deleted pods (`Gpu.stale_*`)."""
        return self._kubelet_holds

    @property
    def problems(self) -> Mapping[NodeName, str]:
        """Why a node offers no GPU (no or unreadable inventory), by node."""
        return self._problems
