"""Fluent-enough builders for Node and Pod objects as the API server returns them.

Nodes carry a real `vgpu.io/gpu-inventory` annotation and pods a real, signed
`vgpu.io/assignment`, both made with the project's own encoders, so the report is tested against
exactly what the agent and the extender write.
"""

from __future__ import annotations

from typing import Any

from tests.pods import container, pod_obj
from vgpu.api.assignment import ADMITTED, binding_annotations
from vgpu.api.inventory import InventoryGpu, NodeGpuInventory, encode_inventory
from vgpu.api.resources import ResourceNames
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare

KEY = b"test-key"
Obj = dict[str, Any]


def gpu_uuid(node: str, index: int) -> str:
    return f"GPU-{node}-{index:02d}"


def node(
    name: str,
    gpus: list[tuple[str, int]] | None = None,
    *,
    unhealthy: tuple[int, ...] = (),
    ip: str = "",
    ready: bool = True,
) -> Obj:
    """A node; `gpus` is [(model, memoryMiB)] by index, None for a node without vgpu."""
    meta: Obj = {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}}
    if gpus is not None:
        inventory = NodeGpuInventory(
            256,
            tuple(
                InventoryGpu(gpu_uuid(name, i), i, m, mib, 100, i not in unhealthy, 0, ())
                for i, (m, mib) in enumerate(gpus)
            ),
        )
        meta["annotations"] = {ResourceNames().inventory: encode_inventory(inventory)}
    status: Obj = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["addresses"] = [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": name},
        ]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": status}


def pod(
    key: str,
    *,
    node: str = "",
    asks: dict[str, tuple[int, int]] | None = None,
    shares: dict[str, list[tuple[int, int, int]]] | None = None,
    phase: str = "Running",
    admitted: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    reused: tuple[tuple[int, int, int], ...] = (),
) -> Obj:
    """A pod `ns/name`. `asks`: container -> (cores, memory blocks) in its limits. `shares`:
    container -> [(gpu index on `node`, cores, memory MiB)] signed as its assignment.
    Running pods' containers have started, so they count as admitted."""
    namespace, name = key.split("/")
    uid = f"uid-{namespace}-{name}"
    containers = [
        container(
            cname, cores=cores, memory=blocks or None, limits={"cpu": "1"}, image="example/app:1"
        )
        for cname, (cores, blocks) in (asks or {"main": (0, 0)}).items()
    ]
    notes = dict(annotations or {})
    if shares is not None:
        assignment = Assignment(
            PodKey(key),
            NodeName(node),
            1000,
            0,
            tuple(
                ContainerAssignment(
                    c,
                    tuple(
                        GpuShare(GpuUUID(gpu_uuid(node, i)), cores, mib * 1000)
                        for i, cores, mib in s
                    ),
                )
                for c, s in shares.items()
            ),
            uid,
            tuple(GpuShare(GpuUUID(gpu_uuid(node, i)), c, mib * 1000) for i, c, mib in reused),
        )
        notes.update(binding_annotations(assignment, KEY))
    if admitted is not None:
        notes[ADMITTED] = admitted
    obj = pod_obj(
        name,
        containers,
        namespace=namespace,
        uid=uid,
        labels=labels or {},
        annotations=notes or None,
        node=node,
        scheduler="vgpu-scheduler",
        phase=phase,
    )
    if phase == "Running":
        obj["status"]["containerStatuses"] = [
            {"name": c["name"], "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}
            for c in containers
        ]
    return obj
