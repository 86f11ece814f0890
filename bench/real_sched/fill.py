"""The N Node objects of bench/real_scheduler_bench.py and the pods that make them half full.

No kubelets run: a Node is created through the API with capacity, a Ready condition and the
`vgpu.io/gpu-inventory` annotation, as KWOK would. Every node has 8 fake A100s (80 GiB); the
GPUs' UUIDs are `GPU-<node>-<index>`, the same in the extender's inventory and in the DRA
driver's ResourceSlice (bench/real_sched/dra.py), so both paths see the same GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.realk8s import pods
from tests.realk8s.rest import Rest
from vgpu.api.assignment import ADMITTED, binding_annotations
from vgpu.api.inventory import InventoryGpu, NodeGpuInventory, encode_inventory
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare

Obj = dict[str, Any]
GPU_MIB = 81920
GPUS = 8
MODEL = "NVIDIA A100-SXM4-80GB"
Filled = tuple[Obj, tuple[ContainerAssignment, ...]]
Fill = Callable[[int, str], Filled | None]
AlsoOnNode = Callable[[Rest, int, str, str], None]
"""More to put on a node once it exists: (admin, index, name, node uid)."""


def gpu_uuid(node: str, index: int) -> str:
    return f"GPU-{node}-{index}"


def node(name: str, cpu: str = "64", memory: str = "256Gi") -> tuple[Obj, Obj]:
    """The Node object and its status patch."""
    inventory = NodeGpuInventory(
        256,
        tuple(
            InventoryGpu(gpu_uuid(name, i), i, MODEL, GPU_MIB, 100, True, 0, ())
            for i in range(GPUS)
        ),
    )
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "vgpu.io/enabled": "true"},
            "annotations": {"vgpu.io/gpu-inventory": encode_inventory(inventory)},
        },
    }
    capacity = {
        "cpu": cpu,
        "memory": memory,
        "pods": "110",
        "vgpu.io/cores": str(100 * GPUS),
        "vgpu.io/memory": str(GPUS * GPU_MIB // 256),
    }
    status = {
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        }
    }
    return obj, status


def fill_pod(index: int, name: str) -> Filled:
    """The pod that makes node `name` half full for the extender (bound to it) and what its
    assignment holds: even nodes four whole GPUs, odd nodes 50 cores of each of the eight."""
    if index % 2 == 0:
        shares = tuple(GpuShare(GpuUUID(gpu_uuid(name, g)), 100, GPU_MIB * 1000) for g in range(4))
        specs = [pods.container("main", 400)]
        assigned: tuple[ContainerAssignment, ...] = (ContainerAssignment("main", shares),)
    else:
        specs = [pods.container(f"c{g}", 50) for g in range(GPUS)]
        assigned = tuple(
            ContainerAssignment(f"c{g}", (GpuShare(GpuUUID(gpu_uuid(name, g)), 50, 0),))
            for g in range(GPUS)
        )
    pod = pods.pod(f"fill-{name}", *specs)
    pod["spec"]["nodeName"] = name
    return pod, assigned


def fragmented_fill(count: int) -> Fill:
    """Every GPU of every node half used, except one node left empty: a whole-GPU pod fits on
    that node alone, while kube-scheduler's own filters pass every node (400 cores free each)."""

    def fill(index: int, name: str) -> Filled | None:
        return None if index == count * 7 // 10 else fill_pod(2 * index + 1, name)

    return fill


def no_fill(_index: int, _name: str) -> Filled | None:
    return None


def populate(
    admin: Rest,
    count: int,
    key: bytes,
    fill: Fill = fill_pod,
    shape: tuple[str, str] = ("64", "256Gi"),
    also: AlsoOnNode | None = None,
) -> None:
    """Create nodes node-00000.. with their fill; `also` adds what another path needs."""

    def one(i: int) -> None:
        name = f"node-{i:05d}"
        obj, status = node(name, *shape)
        uid = admin.post("/api/v1/nodes", obj)["metadata"]["uid"]
        admin.merge_patch(f"/api/v1/nodes/{name}/status", status)
        # The API server's TaintNodesByCondition adds not-ready at creation
        # (plugin/pkg/admission/nodetaint/admission.go); no node lifecycle controller lifts it.
        admin.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        if also is not None:
            also(admin, i, name, uid)
        filled = fill(i, name)
        if filled is None:
            return
        pod, assigned = filled
        pod_uid = admin.post(pods.PODS, pod)["metadata"]["uid"]
        assignment = Assignment(
            PodKey(f"default/fill-{name}"), NodeName(name), 0, 0, assigned, pod_uid
        )
        notes = {**binding_annotations(assignment, key), ADMITTED: "true"}
        admin.merge_patch(f"{pods.PODS}/fill-{name}", {"metadata": {"annotations": notes}})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))
