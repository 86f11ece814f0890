"""What kube-scheduler and the kubelet do around vgpu, played by the end-to-end tests.

`SchedulerDriver` runs kube-scheduler's cycle for each pending pod against the extender over
HTTP: POST filter (`ExtenderArgs` with `Pod` + `NodeNames`, PascalCase as Go encodes it), POST
prioritize when more than one node is feasible, pick the best node, then POST bind, which, as in
kube-scheduler, runs asynchronously while the next pods go through filter. A pod that is not
placed stays in the queue and is tried again in the next round.

`admit` plays the kubelet admitting a bound pod: for each container (init containers first, then
spec order) and each vgpu resource it asks, GetPreferredAllocation then Allocate on that node's
stand-in kubelet; the device IDs it got are recorded in the pod-resources stand-in, and a refused
Allocate fails the pod as the kubelet does (`UnexpectedAdmissionError`).
"""

from __future__ import annotations

import http.client
import json
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc

from tests.e2e.cluster import Cluster, NodeBox, Obj
from tests.pods import container as pod_container
from tests.pods import pod_obj
from tests.waiting import wait_until
from vgpu.adapters._proto.podresources.v1 import api_pb2 as pr
from vgpu.api.resources import ResourceNames

DEFAULT_NAMES = ResourceNames()


def make_pod(
    name: str,
    *,
    containers: list[tuple[str, int, int]] | None = None,
    init: list[tuple[str, int, int]] | None = None,
    cpu: str = "1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    names: ResourceNames = DEFAULT_NAMES,
) -> Obj:
    """A pending pod; containers are (name, vgpu cores, vgpu memory blocks), 0 = not asked."""

    def one(spec: tuple[str, int, int]) -> Obj:
        return pod_container(
            spec[0],
            cores=spec[1],
            memory=spec[2] or None,
            requests={"cpu": cpu, "memory": "1Gi"},
            cores_name=names.cores,
            memory_name=names.memory,
        )

    return pod_obj(
        name,
        [one(c) for c in containers or [("main", 0, 0)]],
        labels=labels or {},
        annotations=annotations or {},
        init=[one(c) for c in init or []],
        scheduler="vgpu-scheduler",
        phase="Pending",
    )


@dataclass
class Attempt:
    """One scheduling cycle of a pod: where it went, or why not."""

    node: str | None
    reasons: dict[str, str] = field(default_factory=dict)
    error: str = ""


class SchedulerDriver:
    """kube-scheduler's side of the extender protocol, one HTTP connection per thread."""

    def __init__(self, cluster: Cluster) -> None:
        assert cluster.extender is not None
        self.cluster = cluster
        self.port = cluster.extender.port
        self.nodes = sorted(cluster.nodes)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="e2e-bind")
        self.last: dict[str, Attempt] = {}

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.conn.close()

    def _post(self, verb: str, doc: Obj, conn: http.client.HTTPConnection | None = None) -> Any:
        conn = conn or self.conn
        body = json.dumps(doc).encode()
        conn.request(
            "POST", f"/scheduler/{verb}", body, headers={"Content-Type": "application/json"}
        )
        resp = conn.getresponse()
        data = resp.read()
        assert resp.status == 200, f"{verb}: HTTP {resp.status}: {data!r}"
        return json.loads(data)

    def filter(self, pod: Obj) -> Obj:
        out = self._post("filter", {"Pod": pod, "Nodes": None, "NodeNames": self.nodes})
        return dict(out)

    def prioritize(self, pod: Obj, nodes: list[str]) -> dict[str, int]:
        out = self._post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": nodes})
        return {h["Host"]: int(h["Score"]) for h in out}

    def bind(self, pod: Obj, node: str) -> str:
        meta = pod["metadata"]
        doc = {
            "PodName": meta["name"],
            "PodNamespace": meta["namespace"],
            "PodUID": meta.get("uid", ""),
            "Node": node,
        }
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            return str(self._post("bind", doc, conn)["Error"])
        finally:
            conn.close()

    def cycle(self, name: str) -> tuple[Attempt, Future[str] | None]:
        """Filter, prioritize, pick; the bind is started asynchronously (its future)."""
        pod = self.cluster.pod(name)
        result = self.filter(pod)
        feasible = result["NodeNames"] or []
        if result["Error"] or not feasible:
            reasons = {**result["FailedNodes"], **result["FailedAndUnresolvableNodes"]}
            return Attempt(None, reasons, result["Error"]), None
        scores = self.prioritize(pod, feasible) if len(feasible) > 1 else {feasible[0]: 0}
        best = max(feasible, key=lambda n: (scores.get(n, 0), -feasible.index(n)))
        return Attempt(best), self.pool.submit(self.bind, pod, best)

    def round(self, names: list[str]) -> dict[str, Attempt]:
        """One scheduling round over `names`: cycles in order, binds awaited at the end."""
        attempts: dict[str, Attempt] = {}
        binds: dict[str, Future[str]] = {}
        for name in names:
            attempts[name], bind = self.cycle(name)
            if bind is not None:
                binds[name] = bind
        for name, bind in binds.items():
            error = bind.result(timeout=30)
            if error:
                attempts[name] = Attempt(None, error=error)
        self.last.update(attempts)
        return attempts


@dataclass
class Admission:
    """What the kubelet got for one pod: per container the device IDs and merged envs."""

    pod: str
    node: str
    ids: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    envs: dict[str, dict[str, str]] = field(default_factory=dict)
    refusal: str = ""


def gpu_asks(pod: Obj, names: ResourceNames = DEFAULT_NAMES) -> list[tuple[str, str, int]]:
    """(container, resource, size) in the kubelet's admission order."""
    spec = pod["spec"]
    out = []
    for c in list(spec.get("initContainers") or []) + list(spec["containers"]):
        limits = (c.get("resources") or {}).get("limits") or {}
        for resource in (names.cores, names.memory):
            if int(limits.get(resource, 0)):
                out.append((c["name"], resource, int(limits[resource])))
    return out


def admit(
    cluster: Cluster, name: str, *, use_preferred: bool = True, fail_refused: bool = True
) -> Admission:
    """Admit a bound pod on its node like the kubelet; a refusal fails the pod."""
    pod = cluster.pod(name)
    node = pod["spec"]["nodeName"]
    box = cluster.nodes[node]
    result = Admission(name, node)
    for container, resource, size in gpu_asks(pod, cluster.names):
        try:
            ids, response = box.kubelet.allocate(resource, size, use_preferred=use_preferred)
        except grpc.RpcError as err:
            result.refusal = str(err.details())
            if fail_refused:
                cluster.set_phase(name, "Failed", "UnexpectedAdmissionError")
            return result
        result.ids.setdefault(container, {})[resource] = ids
        result.envs.setdefault(container, {}).update(response.container_responses[0].envs)
        _hold(box, name, container, resource, ids)
    return result


def _hold(box: NodeBox, pod: str, container: str, resource: str, ids: list[str]) -> None:
    """Record held device IDs in the pod-resources stand-in, as the kubelet's checkpoint does."""
    entry = next((p for p in box.podres.pods if p.name == pod), None)
    if entry is None:
        entry = pr.PodResources(name=pod, namespace="default")
        box.podres.pods.append(entry)
    target = next((c for c in entry.containers if c.name == container), None)
    if target is None:
        target = entry.containers.add(name=container)
    target.devices.add(resource_name=resource, device_ids=ids)


@dataclass
class Outcome:
    """Where a workload ended up after `run`."""

    admissions: dict[str, Admission] = field(default_factory=dict)
    unplaced: dict[str, Attempt] = field(default_factory=dict)
    rounds: int = 0
    bound_in: dict[str, int] = field(default_factory=dict)  # pod -> round it was bound in


def run(cluster: Cluster, driver: SchedulerDriver, names: list[str], *, rounds: int = 6) -> Outcome:
    """Schedule `names` round after round; after each round the kubelets admit the pods bound in
    it, in *reverse* bind order (the kubelet's order is not the scheduler's), and the next round
    starts once the extender has seen the admissions (invariant I is lifted for them)."""
    outcome = Outcome()
    queue = list(names)
    while queue and outcome.rounds < rounds:
        outcome.rounds += 1
        attempts = driver.round(queue)
        bound = [n for n, a in attempts.items() if a.node]
        outcome.bound_in.update(dict.fromkeys(bound, outcome.rounds))
        for name in reversed(bound):
            outcome.admissions[name] = admit(cluster, name)
        for name in bound:
            if not outcome.admissions[name].refusal and gpu_asks(cluster.pod(name), cluster.names):
                wait_until(partial(_admission_seen, cluster, name), 10.0, what=f"{name} admitted")
        queue = [n for n in queue if n not in bound]
    outcome.unplaced = {n: driver.last[n] for n in queue}
    return outcome


def _admission_seen(cluster: Cluster, name: str) -> bool:
    """The agent patched `vgpu.io/admitted` and the extender no longer counts the pod pending."""
    wanted = sorted({c for c, _, _ in gpu_asks(cluster.pod(name), cluster.names)})
    if cluster.admitted(name) != wanted:
        return False
    assert cluster.extender is not None
    cache = cluster.extender.cache
    with cache.atomic():
        return all(f"default/{name}" not in pods for pods in cache.pending.values())
