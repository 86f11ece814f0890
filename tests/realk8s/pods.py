"""Pods for the real cluster and waiting on what the scheduler and the kubelet did with them."""

from __future__ import annotations

from typing import Any

import pytest

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


# The agent refuses an Allocate for a pod whose binding its own pod watch has not delivered yet:
# the kubelet saw the bind first (issue 10, avoidable refusals). A race, so not every run.
AGENT_RACE = "no pending container asks"


def wait_running(rest: Rest, name: str, timeout: float = 60) -> Obj:
    """Wait until the pod runs; a pod that failed stops the wait at once (`PodFailed`). When the
    failure is the agent's known race (issue 10), the test is marked xfail with what happened."""

    def running() -> Obj | None:
        current = get(rest, name)
        status = current.get("status", {})
        if status.get("phase") == "Failed":
            raise PodFailed(name, status)
        return current if status.get("phase") == "Running" else None

    try:
        result: Obj = wait_until(running, timeout, f"pod {name} Running", reraise=PodFailed)
    except PodFailed as err:
        if AGENT_RACE in err.message:
            pytest.xfail(
                f"issue 10: the node agent refused {name}'s Allocate before its pod "
                f"watch delivered the binding: {err.message[:200]}"
            )
        raise
    return result


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
