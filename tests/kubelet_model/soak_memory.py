"""Memory readings for the long soak (`bench/handoff_soak.py`).

The soak runs the extender, the node agents and the kubelet models in one process, so the
process's resident set alone cannot tell whose memory grows. Each reading therefore also holds
the *retained size* of the extender's state and of each agent's state: the bytes
(`sys.getsizeof`) of every object reachable from that component's roots through
`gc.get_referents`, each object counted once per component. A function or bound method counts
with what it captures (closure cells, defaults, the bound object: a journal of undo closures is
state), never its globals or code; classes and modules are not entered; nor are the harness
objects named as `stop` (the world, its nodes, the kubelet models), where the harness's
callbacks lead. An object two components share (an interned string, a `GpuInfo`) counts in each.
Module-level tables are not reached from the roots and count in the resident set only: the
scheduler's pod-shape keys per policy (`vgpu.core.scheduler._KEYS`, at most 4,096 per policy).
"""

from __future__ import annotations

import gc
import resource
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.kubelet_model.world import World

_OPAQUE = (type, types.ModuleType, types.BuiltinFunctionType, types.CodeType, types.FrameType)
"""Objects the walk neither counts nor enters: code and namespaces, not state."""


def _referents(obj: object) -> list[object]:
    """What `obj` holds as state: a function its closure's contents and defaults (not its
    globals), a bound method its object and function, anything else its `gc` referents."""
    if isinstance(obj, types.FunctionType):
        cells = obj.__closure__ or ()  # a cell's gc referent is its content
        return [*cells, *(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()]
    if isinstance(obj, types.MethodType):
        return [obj.__self__, obj.__func__]
    return gc.get_referents(obj)


def retained_size(roots: Iterable[object], stop: Iterable[object] = ()) -> int:
    """Bytes of every object reachable from `roots`, each counted once, not entering `_OPAQUE`
    objects nor those in `stop` (the module doc says what is counted)."""
    seen = {id(o) for o in stop}
    todo = [o for o in roots if id(o) not in seen]
    total = 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(r for r in _referents(obj) if id(r) not in seen)
    return total


def rss_bytes() -> int:
    """The process's resident set now (Linux `/proc/self/statm`), else its peak (`getrusage`)."""
    statm = Path("/proc/self/statm")
    if statm.exists():
        return int(statm.read_text().split()[1]) * resource.getpagesize()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


@dataclass(frozen=True)
class MemoryReading:
    """One reading: the process's resident set, the extender's and each agent's retained size,
    how many pods the world holds (live pods make state; no pods, none), and, to tell a leak
    from the allocator's high-water mark when the resident set grows, the harness's retained
    size (kubelet models, pods, the world's books) and the blocks Python has allocated."""

    rss: int
    extender: int
    agents: tuple[int, ...]
    live_pods: int
    harness: int = 0
    blocks: int = 0


def read_memory(world: World) -> MemoryReading:
    """Collect garbage, then read. The extender's roots are its `Extender` (which holds the
    `ClusterCache`); an agent's are its `Handoff` and `HandoffPolicy` as the node holds them now
    (a restarted agent is a new pair)."""
    gc.collect()
    nodes = list(world.nodes.values())
    kubelets = [n.kubelet for n in nodes]
    stop: list[object] = [world, world.pods, *nodes, *kubelets]
    components = [world.ext, world.cache, *(o for n in nodes for o in (n.handoff, n.policy))]
    books = [world.pods, world.waiting, world.tally, world.refusals, world.swaps]
    return MemoryReading(
        rss=rss_bytes(),
        extender=retained_size([world.ext, world.cache], stop),
        agents=tuple(retained_size([n.handoff, n.policy], stop) for n in nodes),
        live_pods=len(world.pods),
        harness=retained_size([*kubelets, *books, world.deleted_gangs], [world, *components]),
        blocks=sys.getallocatedblocks(),
    )


def peak(window: MemoryReading | None, reading: MemoryReading) -> MemoryReading:
    """The larger of each figure (the live pods: the newer reading's). Bounded memos emptied
    when full make a sawtooth: two single readings of one component may differ by a whole memo,
    the peaks of windows longer than a tooth do not, unless something grows."""
    if window is None:
        return reading
    return MemoryReading(
        rss=max(window.rss, reading.rss),
        extender=max(window.extender, reading.extender),
        agents=tuple(max(a, b) for a, b in zip(window.agents, reading.agents, strict=True)),
        live_pods=reading.live_pods,
        harness=max(window.harness, reading.harness),
        blocks=max(window.blocks, reading.blocks),
    )


def flat(first: int, last: int, tolerance: float = 0.10) -> bool:
    """The soak's "flat": the last reading at most `tolerance` (10 %) above the first one, the
    reading at 10,000 pods. A figure that ends lower has not grown: an agent's state follows the
    pods on its node and swings down as well as up, and a shrink is no leak."""
    return last <= first * (1 + tolerance)
