"""Translating a Kubernetes Node (a plain dict) into the core's `Node`.

CPU and memory come from `status.allocatable`; GPUs from the node agent's inventory annotation
`<domain>/gpu-inventory` (parsed strictly by `vgpu.api.inventory.parse_inventory`). A node
without the annotation, or with a broken one, is kept with no GPUs and a `problem` that the
filter reports instead of the generic "node has no GPUs".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vgpu.api.decode import MALFORMED, DecodeError, guard
from vgpu.api.inventory import parse_inventory
from vgpu.api.quantity import mib_floor, milli_floor
from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.errors import InvalidInventory, InvalidRequest
from vgpu.core.ids import GpuUUID, NodeName
from vgpu.core.model import Gpu, Node

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node as the core sees it, plus why its GPUs are unusable (None: they are fine)."""

    node: Node
    problem: str | None
    unreadable: bool = False
    """The node carries a value that cannot be read (not merely no inventory): reported."""


def node_spec(obj: Obj, names: ResourceNames = DEFAULT_NAMES) -> NodeSpec:
    """Parse a node dict; never raises (a bad inventory or shape is reported as `problem`, and
    the node has no GPUs: unschedulable for vGPU pods, with the reason)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    raw_name = meta.get("name") if isinstance(meta, dict) else None
    name = NodeName(raw_name if isinstance(raw_name, str) else "")
    try:
        with guard(f"node {name}", errors=MALFORMED):
            return _node_spec(obj, name, names)
    except DecodeError as err:
        return NodeSpec(Node(name, 0, 0, ()), str(err), unreadable=True)


def _node_spec(obj: Obj, name: NodeName, names: ResourceNames) -> NodeSpec:
    meta = obj.get("metadata") or {}
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    problem: str | None = None
    try:
        cpu = milli_floor(allocatable.get("cpu", 0), "status.allocatable.cpu")
        mem = mib_floor(allocatable.get("memory", 0), "status.allocatable.memory")
    except InvalidRequest as err:
        cpu, mem, problem = 0, 0, f"node {name}: {err}"
    annotations = meta.get("annotations") or {}
    gpus, broken = _gpus(annotations, names.inventory)
    if names.inventory in annotations:  # a broken inventory is the news; a missing one is not
        problem = broken or problem
    return NodeSpec(Node(name, cpu, mem, gpus), problem or broken, unreadable=problem is not None)


def _gpus(annotations: Obj, key: str) -> tuple[tuple[Gpu, ...], str | None]:
    text = annotations.get(key)
    if text is None:
        return (), f"node has no {key} annotation (is the vgpu node agent running?)"
    try:
        inventory = parse_inventory(text)
    except InvalidInventory as err:
        return (), f"node's {key} annotation is invalid: {err}"
    gpus = tuple(
        Gpu(
            uuid=GpuUUID(g.uuid),
            index=g.index,
            model=g.model,
            memory_mib=g.memory_mib,
            healthy=g.healthy,
            numa=g.numa,
            nvlink_peers=frozenset(GpuUUID(p) for p in g.nvlink_peers),
            stale_cores=g.stale_cores,
            stale_memory_mib=g.stale_memory_mib,
        )
        for g in inventory.gpus
    )
    return gpus, None
