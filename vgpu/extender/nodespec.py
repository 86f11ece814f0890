"""Translating a Kubernetes Node (a plain dict) into the core's `Node`.

CPU and memory come from `status.allocatable`; GPUs from the node agent's inventory annotation
`vgpu.io/gpu-inventory` (parsed strictly by `vgpu.node.inventory.parse_inventory`). A node
without the annotation, or with a broken one, is kept with no GPUs and a `problem` that the
filter reports instead of the generic "node has no GPUs".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vgpu.api.quantity import mib_floor, milli_floor
from vgpu.core.errors import InvalidInventory, InvalidRequest
from vgpu.core.ids import GpuUUID, NodeName
from vgpu.core.model import Gpu, Node
from vgpu.node.inventory import annotation_key, parse_inventory

Obj = dict[str, Any]
INVENTORY = annotation_key("vgpu.io")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node as the core sees it, plus why its GPUs are unusable (None: they are fine)."""

    node: Node
    problem: str | None


def node_spec(obj: Obj) -> NodeSpec:
    """Parse a node dict; never raises for bad inventory (reported as `problem`)."""
    meta = obj.get("metadata") or {}
    name = NodeName(str(meta.get("name") or ""))
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    problem: str | None = None
    try:
        cpu = milli_floor(allocatable.get("cpu", 0), "status.allocatable.cpu")
        mem = mib_floor(allocatable.get("memory", 0), "status.allocatable.memory")
    except InvalidRequest as err:
        cpu, mem, problem = 0, 0, f"node {name}: {err}"
    text = (meta.get("annotations") or {}).get(INVENTORY)
    gpus: tuple[Gpu, ...] = ()
    if text is None:
        problem = problem or f"node has no {INVENTORY} annotation (is the vgpu node agent running?)"
    else:
        try:
            inventory = parse_inventory(text)
        except InvalidInventory as err:
            problem = f"node's {INVENTORY} annotation is invalid: {err}"
        else:
            gpus = tuple(
                Gpu(
                    uuid=GpuUUID(g.uuid),
                    index=g.index,
                    model=g.model,
                    memory_mib=g.memory_mib,
                    healthy=g.healthy,
                    numa=g.numa,
                    nvlink_peers=frozenset(GpuUUID(p) for p in g.nvlink_peers),
                )
                for g in inventory.gpus
            )
    return NodeSpec(Node(name, cpu, mem, gpus), problem)
