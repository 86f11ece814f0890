"""Pods for the real cluster and waiting on what the scheduler and the kubelet did with them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Obj, Rest

NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
GROUP_NAME = "pod-group.scheduling.sigs.k8s.io/name"
GROUP_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"


def container(name: str, cores: int = 0, memory: int = 0, cpu: str = "50m") -> Obj:
    """A container asking `cores` vgpu.io/cores and `memory` vgpu.io/memory blocks (limits)."""
    limits: dict[str, Any] = {"cpu": "200m", "memory": "64Mi"}
    if cores:
        limits["vgpu.io/cores"] = str(cores)
    if memory:
        limits["vgpu.io/memory"] = str(memory)
    return {
        "name": name,
        "image": "registry.local/vgpu-test:1",
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}, "limits": limits},
    }


def pod(
    name: str,
    *containers: Obj,
    labels: dict[str, str] | None = None,
    init: list[Obj] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    spec: Obj = {
        "schedulerName": "vgpu-scheduler",
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "containers": list(containers),
    }
    if init:
        spec["initContainers"] = init
    metadata: Obj = {"name": name, "namespace": NS, "labels": labels or {}}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def get(rest: Rest, name: str) -> Obj:
    return rest.get(f"{PODS}/{name}")


def node_of(rest: Rest, name: str) -> str:
    return str(get(rest, name)["spec"].get("nodeName") or "")


class PodFailed(AssertionError):
    """The kubelet refused or failed the pod: its status reason and message."""

    def __init__(self, name: str, status: Obj) -> None:
        self.reason = str(status.get("reason", ""))
        self.message = str(status.get("message", ""))
        super().__init__(f"pod {name} failed: {self.reason}: {self.message}")


# Where a node's agent logs (set by the cluster): a pod that fails or never runs shows its tail.
_agent_log: Callable[[str], Path] | None = None
TAIL_LINES = 30


def show_agent_logs(where: Callable[[str], Path]) -> None:
    """Name each node's agent log (`where(node)`), for `wait_running`'s failures."""
    global _agent_log
    _agent_log = where


def agent_log_tail(node: str, lines: int = TAIL_LINES) -> str:
    """The end of `node`'s agent log, or why there is none."""
    path = _agent_log(node) if _agent_log is not None and node else None
    if path is None or not path.exists():
        return f"(no agent log for node {node or '(not bound)'})"
    tail = path.read_text(errors="replace").splitlines()[-lines:]
    return f"--- end of {path.name} ---\n" + "\n".join(tail)


def wait_running(rest: Rest, name: str, timeout: float = 60) -> Obj:
    """Wait until the pod runs; a pod that failed stops the wait at once (`PodFailed`). Either
    failure carries the end of the agent log of the pod's node."""

    def running() -> Obj | None:
        current = get(rest, name)
        status = current.get("status", {})
        if status.get("phase") == "Failed":
            raise PodFailed(name, status)
        return current if status.get("phase") == "Running" else None

    try:
        result: Obj = wait_until(running, timeout, f"pod {name} Running", reraise=PodFailed)
    except (PodFailed, TimeoutError) as err:
        try:
            node = node_of(rest, name)
        except ApiError:
            node = ""
        err.add_note(_why_not_running(rest, name))
        err.add_note(agent_log_tail(node))
        raise
    return result


def _why_not_running(rest: Rest, name: str) -> str:
    """What the API server says about a pod that never ran: its gates, conditions and events."""
    try:
        current = get(rest, name)
        events = events_for(rest, name)
    except ApiError as err:
        return f"(pod {name} not readable: {err})"
    gated = [g.get("name") for g in current["spec"].get("schedulingGates") or []]
    conditions = [
        f"{c.get('type')}={c.get('status')} {c.get('reason', '')} {c.get('message', '')}".strip()
        for c in current.get("status", {}).get("conditions", [])
    ]
    said = [f"{e.get('reason')}: {e.get('message')}" for e in events[-8:]]
    return f"gates: {gated}\nconditions: {conditions}\nevents: {said}"


def events_for(rest: Rest, name: str) -> list[Obj]:
    query = f"?fieldSelector=involvedObject.name%3D{name}"
    items: list[Obj] = rest.get(f"/api/v1/namespaces/{NS}/events{query}").get("items", [])
    return items


def delete_all(rest: Rest, namespace: str = NS, timeout: float = 60) -> None:
    """Delete every pod in the namespace and wait until they are gone (grace period 0)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    for item in rest.get(path).get("items", []):
        try:
            rest.request(
                "DELETE",
                f"{path}/{item['metadata']['name']}",
                {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            )
        except ApiError as err:
            if err.status != 404:
                raise
    wait_until(lambda: not rest.get(path).get("items"), timeout, "all test pods to be deleted")
