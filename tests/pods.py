"""The tests' one set of pod-dict builders: a v1 Pod as the API server would hold it.

Every test that needs a pod object builds it here, so the shape of a pod (where limits,
annotations, the node name and the phase go) is written once; the builders of a tier (the
extender's `make_pod`, the hand-off's signed pods, the report's pods with assignments) are
thin wrappers that choose its defaults and add what only they need. Only what is asked for is
set: an absent field stays absent, as in a pod the API server returns without it.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"


def container(
    name: str = "main",
    *,
    cores: int | str = 0,
    memory: int | str | None = None,
    requests: Obj | None = None,
    limits: Obj | None = None,
    image: str = "busybox",
    cores_name: str = CORES,
    memory_name: str = MEMORY,
    **fields: Any,
) -> Obj:
    """A container asking `cores` vGPU cores (0: not asked) and `memory` memory blocks (None: not
    asked) in its limits, with these `requests` (cpu, memory) and any other container `fields`.
    `cores_name`/`memory_name` are the resource names under another `--resource-domain`."""
    asks: Obj = {}
    if cores:
        asks[cores_name] = str(cores)
    if memory is not None:
        asks[memory_name] = str(memory)
    asks |= limits or {}
    resources: Obj = {"limits": asks}
    if requests is not None:
        resources = {"requests": requests, "limits": asks}
    return {"name": name, "image": image, "resources": resources, **fields}


def pod_obj(
    name: str,
    containers: list[Obj] | None = None,
    *,
    namespace: str | None = "default",
    uid: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    init: list[Obj] | None = None,
    node: str = "",
    scheduler: str | None = None,
    phase: str | None = None,
    kind: bool = True,
    **spec: Any,
) -> Obj:
    """A pod `namespace/name` with these containers (default: one plain `main`), and, each only
    when given: its uid, labels, annotations, init containers, node, scheduler and phase; other
    keyword arguments go into the spec. `kind=False` leaves out apiVersion and kind, as in the
    pods the node agent reads from its own lists."""
    meta: Obj = {"name": name}
    for key, value in (
        ("namespace", namespace),
        ("uid", uid),
        ("labels", labels),
        ("annotations", annotations),
    ):
        if value is not None:
            meta[key] = value
    body: Obj = {}
    if scheduler is not None:
        body["schedulerName"] = scheduler
    if node:
        body["nodeName"] = node
    if init is not None:
        body["initContainers"] = init
    body["containers"] = containers if containers is not None else [container()]
    obj: Obj = {"apiVersion": "v1", "kind": "Pod"} if kind else {}
    obj |= {"metadata": meta, "spec": {**body, **spec}}
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj
