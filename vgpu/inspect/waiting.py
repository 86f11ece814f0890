"""Why an unscheduled pod waits: the last word of the scheduler or the extender on it, and
whether it can ever fit.

On call, "why is this pod pending?" has three answers the report must tell apart (they once all
read "waiting for a node"): the cluster is full now (the scheduler's PodScheduled message
says which nodes refused it and why), the pod can never fit (it asks more than any node has, or
a GPU type no node has, or its nodeSelector, required node affinity and tolerations rule out
every node), or its asks are invalid (the extender refuses it, with an `InvalidPod`
Event). The never-fit checks use the extender's own rules (`vgpu.core.units` for valid asks,
`vgpu.api.podspec.selector_of` and `GpuSelector` for the `vgpu.io/gpu-type` matching) over
the published inventories of the nodes the pod may use (`vgpu.api.nodefit`, as the extender's
gang planner and queue pass judge it). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from vgpu.api.inventory import InventoryGpu, NodeGpuInventory
from vgpu.api.nodefit import NO_NODE_ADMITS, allowed_nodes, node_facts, pod_terms
from vgpu.api.podasks import PodAsks, pod_asks
from vgpu.api.podread import namespace_of
from vgpu.api.podspec import selector_of
from vgpu.api.resources import ResourceNames
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import NodeName
from vgpu.core.model import GpuSelector
from vgpu.core.units import CORES_PER_GPU, validate_cores, validate_memory
from vgpu.inspect.gangs import GangMembership
from vgpu.inspect.model import Problem, Unscheduled
from vgpu.inspect.pods import PodFacts
from vgpu.inspect.queue_events import about_pod, held_reason, is_held
from vgpu.inspect.snapshot import Snapshot

Obj = Mapping[str, Any]
INVALID_POD = "InvalidPod"
"""The reason of the Warning Event the extender records on a pod it cannot read."""


def waiting_pods(
    facts: Iterable[tuple[PodFacts, GangMembership | None]],
    snapshot: Snapshot,
    inventories: Mapping[str, NodeGpuInventory],
    names: ResourceNames,
) -> tuple[tuple[Unscheduled, ...], list[Problem]]:
    """Live pods bound to no node that ask for vgpu (or whose asks cannot be read), each with
    its last scheduling reason; one that can never fit, or that the extender refuses as
    invalid, is a problem too (`vgpu.inspect.waiting`)."""
    raw = {_key(p): p for p in snapshot.pods}
    nodes = {f.name: f for f in map(node_facts, snapshot.nodes)}
    out, problems = [], []
    for pod, gang in sorted(facts, key=lambda f: f[0].key):
        obj = raw.get(pod.key)
        if pod.node or pod.terminal or obj is None:
            continue
        asks = pod_asks(obj, names)
        if not (pod.asks_vgpu or asks.problems):
            continue
        reason, invalid = last_reason(obj, snapshot.events)
        if is_held(obj):  # the PodScheduled message says only "blocked by scheduling gates"
            reason = held_reason(obj, snapshot.events)
        spec = obj.get("spec")
        terms = pod_terms(spec if isinstance(spec, Mapping) else {})
        usable = allowed_nodes(terms, nodes, map(NodeName, inventories))
        mine = list(inventories.values()) if usable is None else [inventories[n] for n in usable]
        why = never_fits(obj, asks, mine, every_ruled_out=bool(inventories) and not mine)
        if why is not None:
            problems.append(Problem(pod.key, f"can never be scheduled: {why}"))
        elif invalid:
            problems.append(Problem(pod.key, f"the extender refuses it: {reason}"))
        name = gang.name if gang else ""
        out.append(Unscheduled(pod.key, pod.asks_cores, pod.asks_memory_blocks, name, reason))
    return tuple(out), problems


def _key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{namespace_of(meta)}/{meta.get('name') or ''}"


def last_reason(pod: Obj, events: Iterable[Obj]) -> tuple[str, bool]:
    """The newest of the pod's PodScheduled=False message and its InvalidPod Events, and
    whether it is the extender refusing the pod as invalid; ("", False) when there is none."""
    found: list[tuple[datetime, int, str, bool]] = []
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "False":
            text = str(c.get("message") or c.get("reason") or "")
            found.append((_when(c.get("lastTransitionTime")), 0, text, False))
    for e in events:
        if _about(e, pod):
            stamp = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
            found.append((_when(stamp), 1, str(e.get("message") or ""), True))
    if not found:
        return "", False
    _, _, text, invalid = max(found)
    return " ".join(text.split()), invalid


def never_fits(
    pod: Obj,
    asks: PodAsks,
    inventories: Sequence[NodeGpuInventory],
    *,
    every_ruled_out: bool = False,
) -> str | None:
    """Why the pod can never be placed on these nodes, whatever else runs; None if it could.
    `inventories`: those of the nodes the pod may use; `every_ruled_out`: its node constraints
    rule out every node with vgpu."""
    if asks.problems:
        return f"invalid asks: {asks.problems[0]}"
    for c in asks.containers:
        try:
            cores = validate_cores(c.cores, f"{c.where}[cores]")
            validate_memory(c.memory_blocks or None, cores, field=f"{c.where}[memory]")
        except InvalidRequest as err:
            return f"invalid asks: {err}"
    if every_ruled_out:
        return NO_NODE_ADMITS
    if not inventories:
        return None  # no vgpu node at all: the report says so on its own
    selector = selector_of((pod.get("metadata") or {}).get("annotations") or {})
    nodes = [(inv, [g for g in inv.gpus if selector.allows_model(g.model)]) for inv in inventories]
    if not any(gpus for _, gpus in nodes):
        return _no_such_type(selector, inventories)
    return _too_large(asks, nodes)


def _no_such_type(selector: GpuSelector, inventories: Sequence[NodeGpuInventory]) -> str:
    models = sorted({g.model for inv in inventories for g in inv.gpus})
    return (
        f"asks for GPU {selector.describe()}, which no node has (models: {', '.join(models)}); "
        "fix vgpu.io/gpu-type (whole words of the model name, e.g. A100)"
    )


def _too_large(
    asks: PodAsks, nodes: Sequence[tuple[NodeGpuInventory, list[InventoryGpu]]]
) -> str | None:
    most_gpus = max(len(gpus) for _, gpus in nodes)
    most_cores = max(sum(g.cores for g in gpus) for _, gpus in nodes)
    most_mib = max((g.memory_mib for _, gpus in nodes for g in gpus), default=0)
    for c in asks.containers:
        whole = c.cores // CORES_PER_GPU if c.cores >= CORES_PER_GPU else 0
        if whole > most_gpus:
            return (
                f"container {c.name} asks {whole} whole GPUs; the largest node has {most_gpus} "
                "it may use"
            )
        fits = [
            c.memory_blocks * inv.memory_unit_mib <= max(g.memory_mib for g in gpus)
            for inv, gpus in nodes
            if gpus
        ]
        if 0 < c.cores < CORES_PER_GPU and not any(fits):
            return (
                f"container {c.name} asks {c.memory_blocks} memory blocks, more GPU memory than "
                f"the largest GPU ({most_mib} MiB) has"
            )
    held = asks.held.cores
    if held > most_cores:
        return f"asks {held} cores in all; the largest node has {most_cores} it may use"
    return None


def _about(event: Obj, pod: Obj) -> bool:
    """Whether `event` is an InvalidPod Event about this very pod (`about_pod`)."""
    return event.get("reason") == INVALID_POD and about_pod(event, pod)


def _when(stamp: object) -> datetime:
    """An RFC 3339 time (with or without fractions); the earliest time when absent or bad."""
    if isinstance(stamp, str):
        try:
            when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return EARLIEST
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    return EARLIEST


EARLIEST = datetime.min.replace(tzinfo=UTC)
