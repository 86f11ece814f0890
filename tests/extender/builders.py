"""Builders for Kubernetes objects and a kube-scheduler stand-in speaking the extender wire."""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any

from tests.pods import container, pod_obj
from vgpu.api.inventory import InventoryGpu, NodeGpuInventory, encode_inventory
from vgpu.core.ledger import Ledger
from vgpu.extender.cache.cluster import ClusterCache

Obj = dict[str, Any]
A100 = "NVIDIA A100-SXM4-80GB"


def make_node(
    name: str,
    *,
    gpus: int = 4,
    model: str = A100,
    memory_mib: int = 81920,
    cpu: str = "64",
    memory: str = "256Gi",
    inventory: bool | str = True,
) -> Obj:
    annotations: dict[str, str] = {}
    if inventory is True:
        inv = NodeGpuInventory(
            256,
            tuple(
                InventoryGpu(f"GPU-{name}-{i}", i, model, memory_mib, 100, True, 0, ())
                for i in range(gpus)
            ),
        )
        annotations["vgpu.io/gpu-inventory"] = encode_inventory(inv)
    elif isinstance(inventory, str):
        annotations["vgpu.io/gpu-inventory"] = inventory
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def make_pod(
    name: str,
    *,
    cores: int | str = 0,
    memory: int | str | None = None,
    cpu: str = "1",
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    """A pending pod of the extender's scheduler with one container `main`."""
    main = container(cores=cores, memory=memory, requests={"cpu": cpu, "memory": "1Gi"})
    return pod_obj(
        name,
        [main],
        namespace=namespace,
        labels=labels or {},
        annotations=annotations or {},
        scheduler="vgpu-scheduler",
        phase="Pending",
    )


class Wire:
    """kube-scheduler's side of the extender protocol, over one keep-alive HTTP connection."""

    def __init__(self, port: int, *, tls: ssl.SSLContext | None = None) -> None:
        self.conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection("localhost", port, timeout=30, context=tls)
            if tls is not None
            else http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        )

    def raw(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if method == "POST" else {}
        self.conn.request(method, path, body=body, headers=headers)
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def post(self, verb: str, doc: Any) -> Any:
        status, body = self.raw("POST", f"/scheduler/{verb}", json.dumps(doc).encode())
        assert status == 200, body
        return json.loads(body)

    def filter(self, pod: Obj, nodes: list[str]) -> Obj:
        return dict(self.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": nodes}))

    def prioritize(self, pod: Obj, nodes: list[str]) -> dict[str, int]:
        out = self.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": nodes})
        # A host the reply leaves out scores 0 (kube-scheduler adds nothing for it).
        return dict.fromkeys(nodes, 0) | {h["Host"]: h["Score"] for h in out}

    def bind(self, pod: Obj, node: str) -> str:
        meta = pod["metadata"]
        doc = {
            "PodName": meta["name"],
            "PodNamespace": meta["namespace"],
            "PodUID": meta.get("uid", ""),
            "Node": node,
        }
        return str(self.post("bind", doc)["Error"])

    def schedule(self, pod: Obj, nodes: list[str]) -> tuple[str | None, Obj]:
        """One scheduling cycle: filter, prioritize, pick the best, bind. (node, filter result)."""
        result = self.filter(pod, nodes)
        if result["Error"] or not result["NodeNames"]:
            return None, result
        feasible = result["NodeNames"]
        scores = self.prioritize(pod, feasible) if len(feasible) > 1 else {feasible[0]: 0}
        best = max(feasible, key=lambda n: scores[n])
        error = self.bind(pod, best)
        return (best if not error else None), {**result, "BindError": error}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def ledger_of(cache: ClusterCache) -> Ledger:
    """The cache's ledger itself, for tests that charge or release it directly (the cache
    shows other modules only a read-only view of it)."""
    ledger = cache.ledger
    assert isinstance(ledger, Ledger), type(ledger)
    return ledger
