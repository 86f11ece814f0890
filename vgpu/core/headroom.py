"""The most any node of a cluster offers, so that a pod no node can take is known without asking
every node.

The queue pass tries each held pod's shape once (`vgpu.extender.queues.release_pass`); a shape that
fits nowhere costs a full `Scheduler.select`, every node evaluated by the policy. With 5,000 held
pods of different shapes at 1,000 nodes that was 24-35 s a pass. `fits_nowhere` answers most of
them from one summary of the cluster instead: it is a necessary condition only (True means no node
can take the pod; False means "ask the scheduler"). It asks, loosened, what placement asks
(`vgpu.core.capacity`: `host_fits`, `fractional_fits`, `idle_positions`): the host's CPU and
memory, and per GPU container a healthy GPU the selector's models allow with room for a share, or
enough idle GPUs for whole ones. Every bound is a maximum over nodes or GPUs, so it can only
over-estimate what one node offers; a property test (tests/core/test_headroom.py) checks that the
scheduler never places a pod this rules out, so a placement rule that comes to admit more than this
summary allows fails it. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vgpu.core.model import ContainerRequest, PodRequest
from vgpu.core.state import NodeState
from vgpu.core.units import memory_need_mmib


@dataclass(frozen=True, slots=True)
class GpuRoom:
    """Of the healthy GPUs of one model and size: the most free cores and free memory (mMiB) on
    one of them, and the most idle ones on one node."""

    cores: int
    memory_mmib: int
    idle: int


@dataclass(frozen=True, slots=True)
class Headroom:
    """The most free CPU, host memory and idle GPUs on one node, and `GpuRoom` per (model,
    memory MiB)."""

    cpu_milli: int
    memory_mib: int
    idle_gpus: int
    gpus: Mapping[tuple[str, int], GpuRoom]


_NODE_KEY = ("headroom",)
"""A node's own summary, kept in its memo (`NodeState.cache`, emptied on every change of the
node): a pass summarises only the nodes that changed since the last."""

NodeRoom = tuple[int, int, int, dict[tuple[str, int], tuple[int, int, int]]]


def headroom(nodes: Iterable[NodeState]) -> Headroom:
    """The cluster's summary (the caller holds whatever keeps the states still)."""
    cpu = mem = most_idle = 0
    best: dict[tuple[str, int], list[int]] = {}
    for ns in nodes:
        node_cpu, node_mem, node_idle, gpus = _node_room(ns)
        cpu, mem, most_idle = max(cpu, node_cpu), max(mem, node_mem), max(most_idle, node_idle)
        for key, (cores, memory, idle) in gpus.items():
            room = best.get(key)
            if room is None:
                best[key] = [cores, memory, idle]
            else:
                room[0], room[1] = max(room[0], cores), max(room[1], memory)
                room[2] = max(room[2], idle)
    return Headroom(cpu, mem, most_idle, {k: GpuRoom(*v) for k, v in best.items()})


def _node_room(ns: NodeState) -> NodeRoom:
    """One node's free CPU, memory, idle healthy GPUs, and per (model, size) its healthy GPUs'
    most free cores, most free memory and idle count."""
    hit = ns.cache.get(_NODE_KEY)
    if hit is not None:
        return hit  # type: ignore[return-value]
    gpus: dict[tuple[str, int], tuple[int, int, int]] = {}
    idle_total = 0
    for pos, gpu in enumerate(ns.gpus):
        if not gpu.healthy:
            continue
        key = (gpu.model, gpu.memory_mib)
        cores, memory, idle = gpus.get(key, (0, 0, 0))
        is_idle = ns.is_idle_gpu(pos)
        idle_total += is_idle
        gpus[key] = (
            max(cores, ns.free_cores[pos]),
            max(memory, ns.free_mem[pos]),
            idle + is_idle,
        )
    room: NodeRoom = (ns.cpu_free, ns.mem_free, idle_total, gpus)
    ns.cache[_NODE_KEY] = room
    return room


def fits_nowhere(room: Headroom, pod: PodRequest) -> bool:
    """True only when no node summarised in `room` can take `pod` (module doc)."""
    if pod.cpu_milli > room.cpu_milli or pod.memory_mib > room.memory_mib:
        return True
    allowed = [(k, r) for k, r in room.gpus.items() if pod.selector.allows_model(k[0])]
    return any(not _somewhere(c, allowed, room.idle_gpus) for c in pod.gpu_containers)


def _somewhere(
    container: ContainerRequest, allowed: list[tuple[tuple[str, int], GpuRoom]], idle: int
) -> bool:
    """Whether some GPU (or node, for whole GPUs) might take the container."""
    if container.whole:  # idle GPUs of several allowed models may sit on one node
        return min(idle, sum(r.idle for _, r in allowed)) >= container.gpus
    return any(
        r.cores >= container.cores
        and r.memory_mmib >= memory_need_mmib(container.cores, container.memory_mib, size)
        for (_, size), r in allowed
    )
