"""The watch events of a bound vGPU pod's life, shaped as kube-apiserver serves them.

`lives(pods, nodes)` returns, for each step of `STEPS`, the watch-stream lines (one JSON event
per line, as the API server writes them) of that step for every pod. The objects carry what the
API server fills in (defaults, the service-account token volume, tolerations, managedFields of
each writer) and what each writer changes:

* created: the pod as a client created it (phase Pending, no node);
* bound: the extender's Binding (`spec.nodeName`, the assignment annotations, PodScheduled);
* kubelet-pending: the kubelet's first status (conditions, host IP, containers waiting);
* admitted: the node agent's `vgpu.io/admitted` annotation;
* running: the kubelet's status once the container runs (ready, started, pod IP);
* deleting: `kubectl delete` (deletionTimestamp and grace period);
* terminated: the kubelet's status once the container exited (phase Succeeded);
* deleted: the DELETED event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from vgpu.api.admitted import ADMITTED, encode_admitted
from vgpu.api.assignment import binding_annotations
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare

Obj = dict[str, Any]
KEY = b"bench-key"
GPU_MIB = 81920
STEPS = (
    "created",
    "bound",
    "kubelet-pending",
    "admitted",
    "running",
    "deleting",
    "terminated",
    "deleted",
)
T0 = "2026-12-01T05:00:00Z"
T1 = "2026-12-01T05:00:01Z"
T2 = "2026-12-01T05:00:03Z"
T3 = "2026-12-01T05:10:00Z"
MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def _fields(*paths: str) -> Obj:
    """A managedFields fieldsV1 tree naming `paths` ("f:spec|f:containers|...")."""
    tree: Obj = {}
    for path in paths:
        node, parts = tree, path.split("|")
        for depth, part in enumerate(parts):
            node = node.setdefault(part, {})
            if 0 < depth < len(parts) - 1:
                node.setdefault(".", {})
    return tree


def _managed(manager: str, *paths: str, subresource: str | None = None) -> Obj:
    entry = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": T1,
        "fieldsType": "FieldsV1",
        "fieldsV1": _fields(*paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _created(name: str, uid: str) -> Obj:
    container = {
        "name": "main",
        "image": "registry.example/train:1.0",
        "command": ["python", "train.py"],
        "resources": {
            "limits": {"vgpu.io/cores": "50"},
            "requests": {"cpu": "1", "memory": "1Gi", "vgpu.io/cores": "50"},
        },
        "volumeMounts": [{"name": "kube-api-access-x7k2p", "readOnly": True, "mountPath": MOUNT}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    token = {
        "name": "kube-api-access-x7k2p",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }
    tolerations = [
        {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute"}
        | {"tolerationSeconds": 300}
        for t in ("not-ready", "unreachable")
    ]
    client = _managed(
        "python-requests",
        "f:metadata|f:labels|f:app",
        'f:spec|f:containers|k:{"name":"main"}|f:image',
        'f:spec|f:containers|k:{"name":"main"}|f:resources|f:limits|f:vgpu.io/cores',
        'f:spec|f:containers|k:{"name":"main"}|f:resources|f:requests|f:cpu',
        'f:spec|f:containers|k:{"name":"main"}|f:terminationMessagePolicy',
        "f:spec|f:dnsPolicy",
        "f:spec|f:restartPolicy",
        "f:spec|f:schedulerName",
        "f:spec|f:terminationGracePeriodSeconds",
    )
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": T0,
            "labels": {"app": "train"},
            "managedFields": [client],
        },
        "spec": {
            "volumes": [token],
            "containers": [container],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": tolerations,
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def _condition(kind: str, status: bool, at: str, reason: str | None = None) -> Obj:
    out: Obj = {"type": kind, "status": str(status), "lastProbeTime": None}
    out["lastTransitionTime"] = at
    if reason:
        out["reason"] = reason
    return out


def _status(pod: Obj, phase: str, state: Obj, ready: bool, at: str) -> None:
    """A kubelet status write (replaces the status, adds the kubelet's managedFields)."""
    started = "running" in state
    pod["status"] = {
        "phase": phase,
        "conditions": [
            _condition("PodReadyToStartContainers", started, at),
            _condition("Initialized", True, T1),
            _condition("Ready", ready, at, None if ready else "ContainersNotReady"),
            _condition("ContainersReady", ready, at, None if ready else "ContainersNotReady"),
            _condition("PodScheduled", True, T1),
        ],
        "hostIP": "10.0.0.7",
        "hostIPs": [{"ip": "10.0.0.7"}],
        "podIP": "10.244.1.9" if started else None,
        "startTime": T1,
        "containerStatuses": [
            {
                "name": "main",
                "state": state,
                "lastState": {},
                "ready": ready,
                "restartCount": 0,
                "image": "registry.example/train:1.0",
                "imageID": "registry.example/train@sha256:" + "ab" * 32 if started else "",
                "containerID": "containerd://" + "cd" * 32 if started else None,
                "started": started,
                "volumeMounts": [
                    {"name": "kube-api-access-x7k2p", "mountPath": MOUNT, "readOnly": True}
                ],
            }
        ],
        "qosClass": "Burstable",
    }
    pod["status"] = {k: v for k, v in pod["status"].items() if v is not None}
    kubelet = _managed(
        "kubelet",
        'f:status|f:conditions|k:{"type":"Ready"}|f:status',
        'f:status|f:conditions|k:{"type":"ContainersReady"}|f:status',
        'f:status|f:conditions|k:{"type":"PodReadyToStartContainers"}|f:status',
        "f:status|f:containerStatuses",
        "f:status|f:hostIP",
        "f:status|f:hostIPs",
        "f:status|f:podIP",
        "f:status|f:startTime",
        subresource="status",
    )
    managed = [m for m in pod["metadata"]["managedFields"] if m["manager"] != "kubelet"]
    pod["metadata"]["managedFields"] = [*managed, kubelet]


def _assignment(pod: Obj, node: str, gpu: int) -> Assignment:
    meta = pod["metadata"]
    share = GpuShare(GpuUUID(f"GPU-{node}-{gpu}"), 50, GPU_MIB * 500)
    return Assignment(
        PodKey(f"default/{meta['name']}"),
        NodeName(node),
        1000,
        1024,
        (ContainerAssignment("main", (share,)),),
        meta["uid"],
    )


def _life(index: int, nodes: int) -> list[tuple[str, str]]:
    """One pod's (event type, object as JSON) per step (resourceVersions "0", set later)."""
    name, node = f"train-{index:05d}", f"node-{index % nodes:05d}"
    uid = f"{index:08x}-1d2c-4a5b-9e8f-{index:012x}"
    pod = _created(name, uid)
    out = [("ADDED", json.dumps(pod, separators=(",", ":")))]

    def step(edit: Callable[[Obj], None], kind: str = "MODIFIED") -> None:
        edit(pod)
        out.append((kind, json.dumps(pod, separators=(",", ":"))))

    def bind(p: Obj) -> None:
        p["spec"]["nodeName"] = node
        p["metadata"]["annotations"] = binding_annotations(
            _assignment(p, node, (index // nodes) % 8), KEY
        )
        p["status"]["conditions"] = [_condition("PodScheduled", True, T1)]

    def admit(p: Obj) -> None:
        p["metadata"]["annotations"][ADMITTED] = encode_admitted(["main"])
        agent = _managed("vgpu-node", f"f:metadata|f:annotations|f:{ADMITTED}")
        p["metadata"]["managedFields"].append(agent)

    def delete(p: Obj) -> None:
        p["metadata"]["deletionTimestamp"] = T3
        p["metadata"]["deletionGracePeriodSeconds"] = 30

    waiting = {"waiting": {"reason": "ContainerCreating"}}
    step(bind)
    step(lambda p: _status(p, "Pending", waiting, False, T1))
    step(admit)
    step(lambda p: _status(p, "Running", {"running": {"startedAt": T2}}, True, T2))
    step(delete)
    done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": T2, "finishedAt": T3}}
    step(lambda p: _status(p, "Succeeded", done, False, T3))
    step(lambda p: None, "DELETED")
    return out


def lives(pods: int, nodes: int) -> list[list[bytes]]:
    """Per step of `STEPS`, every pod's watch line for it, resourceVersions increasing."""
    steps: list[list[bytes]] = [[] for _ in STEPS]
    version = 100
    per_pod = [_life(i, nodes) for i in range(pods)]
    for s in range(len(STEPS)):
        for life in per_pod:
            kind, obj = life[s]
            version += 1
            obj = obj.replace('"resourceVersion":"0"', f'"resourceVersion":"{version}"', 1)
            steps[s].append(f'{{"type":"{kind}","object":{obj}}}'.encode())
    return steps
