"""Choosing concrete GPUs on one node, shared by the extender's bind and the simulator.

A `Choice` lists, per GPU-wanting container of the pod (in the pod's order), the GPU positions it
takes. Containers are placed whole-GPU asks first, then fractional asks from the largest down, each
on the GPU a *picker* prefers among those that fit; the node is restored afterwards. Whole-GPU asks
prefer sets of GPUs joined by NVLink, then on one NUMA node, then the lowest indices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import combinations

from vgpu.core.capacity import candidates
from vgpu.core.model import (
    Assignment,
    ContainerAssignment,
    ContainerRequest,
    GpuShare,
    PodRequest,
)
from vgpu.core.state import NodeState
from vgpu.core.units import memory_need_mmib

Choice = tuple[tuple[int, ...], ...]
GpuPicker = Callable[[NodeState, ContainerRequest, list[int]], int]
"""A policy's pick of one GPU for a fractional share among those that fit (`cands`)."""
ContainerPicker = Callable[[NodeState, ContainerRequest, list[int]], tuple[int, ...] | None]
"""The GPUs one container takes among those that fit (`cands`), or None when they are too few."""


def best_fit_pick(ns: NodeState, c: ContainerRequest, cands: list[int]) -> int:
    """The fitting GPU with the fewest free cores (then memory), lowest position first."""
    return min(cands, key=lambda p: (ns.free_cores[p], ns.free_mem[p], p))


def spread_pick(ns: NodeState, c: ContainerRequest, cands: list[int]) -> int:
    """The fitting GPU with the most free cores (then memory), lowest position first."""
    return min(cands, key=lambda p: (-ns.free_cores[p], -ns.free_mem[p], p))


def whole_pick(ns: NodeState, count: int, idle: list[int]) -> tuple[int, ...]:
    """`count` idle GPUs, preferring NVLink-connected sets, then one NUMA node, then low indices."""
    if count == len(idle) or count <= 1:
        return tuple(idle[:count])
    gpus = ns.gpus
    if not any(gpus[p].nvlink_peers for p in idle) and len({gpus[p].numa for p in idle}) == 1:
        return tuple(idle[:count])

    def rank(group: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        links = sum(1 for a, b in combinations(group, 2) if gpus[b].uuid in gpus[a].nvlink_peers)
        numas = len({gpus[p].numa for p in group})
        return (-links, numas, group)

    if len(idle) <= 12:
        return min(combinations(idle, count), key=rank)
    return tuple(idle[:count])


def _order(pod: PodRequest) -> list[int]:
    wanting = pod.gpu_containers
    return sorted(range(len(wanting)), key=lambda i: (not wanting[i].whole, -wanting[i].cores, i))


def choose(ns: NodeState, pod: PodRequest, pick: GpuPicker = best_fit_pick) -> Choice | None:
    """A GPU choice for every GPU-wanting container of the pod, or None if they don't all fit."""
    wanting = pod.gpu_containers
    if len(wanting) == 1:  # the common case: nothing to take and give back
        chosen = _policy_pick(ns, wanting[0], candidates(ns, wanting[0], pod.selector), pick)
        return None if chosen is None else (chosen,)
    return take_in_turn(ns, pod, _order(pod), lambda n, c, cands: _policy_pick(n, c, cands, pick))


def _policy_pick(
    ns: NodeState, c: ContainerRequest, cands: list[int], pick: GpuPicker
) -> tuple[int, ...] | None:
    if c.whole:
        return whole_pick(ns, c.gpus, cands) if len(cands) >= c.gpus else None
    return (pick(ns, c, cands),) if cands else None


def take_in_turn(
    ns: NodeState, pod: PodRequest, turns: Iterable[int], pick: ContainerPicker
) -> Choice | None:
    """Each GPU-wanting container, in the order of `turns` (indices into `pod.gpu_containers`),
    takes the GPUs `pick` names among those it fits, charged on `ns` so that later containers
    see them taken; `ns` is given back whole before returning. None when `pick` finds no room
    for one. The one take-and-undo loop: the policies' choice (`choose`) and the simulator's
    DRA allocator (`vgpu.sim.dra`) differ only in their turns and their picker."""
    wanting = pod.gpu_containers
    picked: dict[int, tuple[int, ...]] = {}
    undo: list[tuple[int, int, int]] = []
    try:
        for i in turns:
            c = wanting[i]
            chosen = pick(ns, c, candidates(ns, c, pod.selector))
            if chosen is None:
                return None
            for p in chosen:
                cores, mem = _take(ns, p, c)
                undo.append((p, cores, mem))
            picked[i] = chosen
    finally:
        for p, cores, mem in undo:
            ns.free_cores[p] += cores
            ns.free_mem[p] += mem
    return tuple(picked[i] for i in range(len(wanting)))


def first_fit(ns: NodeState, pod: PodRequest) -> Choice | None:
    """Any valid choice (best-fit), used to answer "does it fit at all"."""
    return choose(ns, pod, best_fit_pick)


def share_of(ns: NodeState, pos: int, c: ContainerRequest) -> tuple[int, int]:
    """(cores, memory mMiB) a container takes from the GPU at `pos`."""
    if c.whole:
        return ns.free_cores[pos], ns.total_mem[pos]
    return c.cores, memory_need_mmib(c.cores, c.memory_mib, ns.gpus[pos].memory_mib)


def _take(ns: NodeState, pos: int, c: ContainerRequest) -> tuple[int, int]:
    cores, mem = (100, ns.total_mem[pos]) if c.whole else share_of(ns, pos, c)
    ns.free_cores[pos] -= cores
    ns.free_mem[pos] -= mem
    return cores, mem


def assignment_for(ns: NodeState, pod: PodRequest, choice: Choice) -> Assignment:
    """The ledger assignment for a pod placed on this node with this choice."""
    wanting = pod.gpu_containers
    by_name: dict[str, ContainerAssignment] = {}
    for c, positions in zip(wanting, choice, strict=True):
        shares = []
        for p in positions:
            gpu = ns.gpus[p]
            if c.whole:
                shares.append(GpuShare(gpu.uuid, 100, ns.total_mem[p]))
            else:
                mem = memory_need_mmib(c.cores, c.memory_mib, gpu.memory_mib)
                shares.append(GpuShare(gpu.uuid, c.cores, mem))
        by_name[c.name] = ContainerAssignment(c.name, tuple(shares))
    return Assignment(
        pod=pod.key,
        node=ns.name,
        cpu_milli=pod.cpu_milli,
        memory_mib=pod.memory_mib,
        containers=tuple(by_name[c.name] for c in wanting),
        uid=pod.uid,
    )
