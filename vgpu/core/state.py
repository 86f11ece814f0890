"""Cluster state: per-node free CPU, host memory and per-GPU free cores and memory.

`ClusterState` holds every node's free capacity and the ledger's holdings. Every mutation is
journaled while a fork is open, so what-if planning (a gang, a look-ahead) costs only the undo
records of what it touched, never a deep copy of the cluster:

    state.fork(); ...try things...; state.revert()   # or state.commit()

Forks nest. Invariant: free capacity never goes below zero on any axis (charging checks first and
raises `Conflict`; callers are expected to have checked fit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from vgpu.core.changes import ChangeFeed
from vgpu.core.errors import Conflict, StateError, UnknownNode
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, Gpu, Holding, Node
from vgpu.core.units import CORES_PER_GPU, mib_to_mmib


def kind_of(assignment: Assignment) -> str:
    """The kind of a held pod: "no-gpu", "share" or "<n>-gpu" (whole GPUs)."""
    shares = assignment.shares
    if not shares:
        return "no-gpu"
    if all(s.cores < CORES_PER_GPU for s in shares):
        return "share"
    return f"{len(shares)}-gpu"


class NodeState:
    """Mutable free capacity of one node. Positions index `node.gpus`."""

    __slots__ = (
        "cache",
        "cpu_free",
        "feed",
        "free_cores",
        "free_mem",
        "kinds",
        "mem_free",
        "node",
        "positions",
        "total_mem",
        "version",
    )

    def __init__(self, node: Node) -> None:
        self.node = node
        self.cpu_free = node.cpu_milli
        self.mem_free = node.memory_mib
        self.total_mem = [mib_to_mmib(g.memory_mib) for g in node.gpus]
        # Devices the kubelet still counts for pods gone from the node are taken (Gpu.stale_*).
        self.free_cores = [max(CORES_PER_GPU - g.stale_cores, 0) for g in node.gpus]
        self.free_mem = [
            max(t - mib_to_mmib(g.stale_memory_mib), 0)
            for t, g in zip(self.total_mem, node.gpus, strict=True)
        ]
        self.positions: dict[GpuUUID, int] = {g.uuid: i for i, g in enumerate(node.gpus)}
        self.kinds: dict[str, int] = {}
        """How many held pods of each kind ("no-gpu", "share", "1-gpu", ...) the node carries."""
        self.version = 0
        self.cache: dict[object, object] = {}
        """Per-node memo for policies, keyed by whatever they like; cleared on every change."""
        self.feed: ChangeFeed | None = None
        """Where changes are announced to derived views (set by a `ClusterState` that has one)."""

    @property
    def name(self) -> NodeName:
        """The node's name."""
        return self.node.name

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        """The node's GPUs, by position."""
        return self.node.gpus

    def is_idle_gpu(self, pos: int) -> bool:
        """Whether a GPU is entirely free (cores and memory)."""
        return self.free_cores[pos] == CORES_PER_GPU and self.free_mem[pos] == self.total_mem[pos]

    def gpu_free_milli(self) -> int:
        """Free GPU compute of the node in milli-GPUs (healthy GPUs only)."""
        return sum(
            f * 10 for f, g in zip(self.free_cores, self.node.gpus, strict=True) if g.healthy
        )

    def touched(self) -> None:
        """Record a change: bump the version and drop memoised evaluations."""
        self.version += 1
        if self.cache:
            self.cache = {}
        if self.feed is not None:
            self.feed.mark(self.node.name)


class ClusterState:
    """All nodes' free capacity plus the ledger's holdings, with fork/commit/revert."""

    def __init__(self, nodes: Iterable[Node] = (), *, feed: ChangeFeed | None = None) -> None:
        self.feed = feed
        """Announces every node whose state changes (None: nobody derives views)."""
        self._nodes: dict[NodeName, NodeState] = {}
        self.holdings: dict[PodKey, Holding] = {}
        self._by_node: dict[NodeName, dict[PodKey, None]] = {}
        """Pods held per node (an index of `holdings`, kept by the methods that change it)."""
        self._journal: list[Callable[[], None]] = []
        self._marks: list[int] = []
        for node in nodes:
            self.add_node(node)

    # -- nodes ---------------------------------------------------------------------------------
    def add_node(self, node: Node) -> None:
        """Add a node, or replace its inventory keeping what its holdings charge."""
        old = self._nodes.get(node.name)
        held = [h.assignment for h in self.holdings_on(node.name)]
        fresh = NodeState(node)
        fresh.feed = self.feed
        self._put(node.name, fresh)
        if old is not None:
            self._record(lambda: self._put(node.name, old))
        else:
            self._record(lambda: self._forget(node.name))
        for assignment in held:
            self._charge_unchecked(assignment, -1)

    def _put(self, name: NodeName, ns: NodeState) -> None:
        self._nodes[name] = ns
        if self.feed is not None:
            self.feed.mark(name)

    def _forget(self, name: NodeName) -> None:
        self._nodes.pop(name, None)
        if self.feed is not None:
            self.feed.mark(name)

    def remove_node(self, name: NodeName) -> None:
        """Forget a node (its holdings stay in the ledger until released)."""
        old = self._nodes.get(name)
        if old is not None:
            self._forget(name)
            self._record(lambda: self._put(name, old))

    def node(self, name: NodeName) -> NodeState:
        """The state of a node; raises `UnknownNode`."""
        try:
            return self._nodes[name]
        except KeyError:
            raise UnknownNode(f"node {name!r} is not in the cluster state") from None

    def has_node(self, name: NodeName) -> bool:
        """Whether the node is known."""
        return name in self._nodes

    def nodes(self) -> Iterator[NodeState]:
        """All node states, in insertion order."""
        return iter(self._nodes.values())

    def node_names(self) -> list[NodeName]:
        """All node names, in insertion order."""
        return list(self._nodes)

    # -- capacity ------------------------------------------------------------------------------
    def can_charge(self, assignment: Assignment) -> str | None:
        """None if the assignment fits the node's free capacity, else why not."""
        if assignment.node not in self._nodes:
            return f"node {assignment.node} is unknown"
        ns = self._nodes[assignment.node]
        if assignment.cpu_milli > ns.cpu_free:
            return f"{assignment.cpu_milli}m CPU asked, {ns.cpu_free}m free"
        if assignment.memory_mib > ns.mem_free:
            return f"{assignment.memory_mib} MiB memory asked, {ns.mem_free} MiB free"
        need: dict[int, list[int]] = {}
        for share in assignment.charged:
            pos = ns.positions.get(share.uuid)
            if pos is None:
                return f"GPU {share.uuid} is not on node {assignment.node}"
            acc = need.setdefault(pos, [0, 0])
            acc[0] += share.cores
            acc[1] += share.memory_mmib
        for pos, (cores, mem) in need.items():
            if cores > ns.free_cores[pos] or mem > ns.free_mem[pos]:
                return (
                    f"GPU {ns.gpus[pos].index}: {ns.free_cores[pos]} cores and "
                    f"{ns.free_mem[pos] // 1000} MiB free, {cores} cores and {mem // 1000} MiB asked"
                )
        return None

    def charge(self, assignment: Assignment) -> None:
        """Subtract an assignment from free capacity; raises `Conflict` if it does not fit."""
        problem = self.can_charge(assignment)
        if problem is not None:
            raise Conflict(f"cannot hold {assignment.pod} on {assignment.node}: {problem}")
        self._charge_unchecked(assignment, -1)

    def refund(self, assignment: Assignment) -> None:
        """Give an assignment's capacity back (the node may have gone: then nothing to do)."""
        if assignment.node in self._nodes:
            self._charge_unchecked(assignment, +1)

    def _charge_unchecked(self, assignment: Assignment, sign: int) -> None:
        ns = self._nodes[assignment.node]
        ns.cpu_free += sign * assignment.cpu_milli
        ns.mem_free += sign * assignment.memory_mib
        for share in assignment.charged:
            pos = ns.positions.get(share.uuid)
            if pos is not None:
                ns.free_cores[pos] += sign * share.cores
                ns.free_mem[pos] += sign * share.memory_mmib
        kind = kind_of(assignment)
        ns.kinds[kind] = ns.kinds.get(kind, 0) - sign
        if not ns.kinds[kind]:
            del ns.kinds[kind]
        ns.touched()
        # Undo runs inside revert(), where no fork is open, so it records nothing itself.
        self._record(lambda: self._charge_unchecked(assignment, -sign))

    # -- holdings (raw; the ledger gives them meaning) -----------------------------------------
    def put_holding(self, holding: Holding) -> None:
        """Set a holding, journaled."""
        key = holding.assignment.pod
        old = self.holdings.get(key)
        self._set_holding(key, holding)
        self._record(lambda: self._restore_holding(key, old))

    def drop_holding(self, key: PodKey) -> Holding | None:
        """Remove a holding, journaled; returns what was there."""
        old = self.holdings.get(key)
        if old is not None:
            self._set_holding(key, None)
            self._record(lambda: self._restore_holding(key, old))
        return old

    def holdings_on(self, node: NodeName) -> list[Holding]:
        """The holdings on one node (indexed: no scan of every holding)."""
        return [self.holdings[key] for key in self._by_node.get(node, ())]

    def _restore_holding(self, key: PodKey, holding: Holding | None) -> None:
        self._set_holding(key, holding)

    def _set_holding(self, key: PodKey, holding: Holding | None) -> None:
        old = self.holdings.get(key)
        if old is not None and (holding is None or old.assignment.node != holding.assignment.node):
            pods = self._by_node[old.assignment.node]
            del pods[key]
            if not pods:
                del self._by_node[old.assignment.node]
        if holding is None:
            self.holdings.pop(key, None)
        else:
            self.holdings[key] = holding
            self._by_node.setdefault(holding.assignment.node, {})[key] = None

    # -- fork / commit / revert ----------------------------------------------------------------
    def _record(self, undo: Callable[[], None]) -> None:
        if self._marks:
            self._journal.append(undo)

    @property
    def forked(self) -> bool:
        """Whether a fork is open."""
        return bool(self._marks)

    def fork(self) -> None:
        """Open a (nested) what-if scope."""
        self._marks.append(len(self._journal))

    def commit(self) -> None:
        """Keep everything done since the innermost fork."""
        if not self._marks:
            raise StateError("commit without fork")
        self._marks.pop()
        if not self._marks:
            self._journal.clear()

    def revert(self) -> None:
        """Undo everything done since the innermost fork."""
        if not self._marks:
            raise StateError("revert without fork")
        mark = self._marks.pop()
        saved, self._marks = self._marks, []
        try:
            while len(self._journal) > mark:
                self._journal.pop()()
        finally:
            self._marks = saved

    @contextmanager
    def what_if(self) -> Iterator[ClusterState]:
        """A fork that is always reverted: ``with state.what_if(): ...``."""
        self.fork()
        try:
            yield self
        finally:
            self.revert()
