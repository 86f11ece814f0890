"""The API paths and the request bodies `KubeApi` sends, as plain dicts in wire form.

Each body follows its type's API reference (core/v1 Binding, Event; policy/v1 Eviction; JSON
merge patch, RFC 7386; JSON patch, RFC 6902), built here so that `vgpu.adapters.kube.calls` reads as
the list of calls vgpu makes. Times are formatted as the API server parses them: MicroTime with
exactly six fraction digits, Time in whole seconds.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from vgpu.adapters.kube.plumbing import Params

Obj = dict[str, Any]
LEASES = {"group": "coordination.k8s.io", "version": "v1", "plural": "leases"}
PODGROUPS = {"group": "scheduling.x-k8s.io", "version": "v1alpha1", "plural": "podgroups"}
# Path templates; `{...}` are filled (quoted) by the client from the request's params.
NODES = "/api/v1/nodes"
NAMESPACES = "/api/v1/namespaces"
NODE = NODES + "/{name}"
ALL_PODS = "/api/v1/pods"
PODS = "/api/v1/namespaces/{namespace}/pods"
POD = PODS + "/{name}"
EVENTS = "/api/v1/namespaces/{namespace}/events"
ALL_EVENTS = "/api/v1/events"
CONFIGMAP = "/api/v1/namespaces/{namespace}/configmaps/{name}"
CUSTOM = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"
CUSTOM_OBJECT = CUSTOM + "/{name}"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def microtime(moment: datetime) -> str:
    """Format a MicroTime the API server accepts: always exactly six fraction digits."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pods_path(namespace: str | None) -> tuple[str, Params]:
    """The pod collection: all namespaces, or one."""
    return (ALL_PODS, {}) if namespace is None else (PODS, {"namespace": namespace})


def binding(
    namespace: str,
    name: str,
    node: str,
    annotations: Mapping[str, str] | None,
    uid: str | None,
    resource_version: str | None,
) -> Obj:
    """A Binding of the pod to `node`; its annotations land on the pod in the same write, and
    `uid`/`resource_version` are its preconditions."""
    meta: Obj = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    if uid:
        meta["uid"] = uid
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def gate_removal(gates: list[str], gate: str, uid: str) -> list[Obj]:
    """A JSON patch removing `gate` that first tests the gate list as read (and the UID when
    given), so it fails whole if anyone changed them since."""
    kept = [{"name": g} for g in gates if g != gate]
    ops: list[Obj] = [
        {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": g} for g in gates]}
    ]
    if uid:
        ops.insert(0, {"op": "test", "path": "/metadata/uid", "value": uid})
    ops.append(
        {"op": "replace", "path": "/spec/schedulingGates", "value": kept}
        if kept
        else {"op": "remove", "path": "/spec/schedulingGates"}
    )
    return ops


def eviction(namespace: str, name: str, uid: str, dry_run: bool) -> Obj:
    """A policy/v1 Eviction, with the UID as precondition and `dryRun: [All]` when asked."""
    meta: Obj = {"name": name, "namespace": namespace}
    body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": meta}
    options: Obj = {}
    if uid:
        options["preconditions"] = {"uid": uid}
    if dry_run:
        options["dryRun"] = ["All"]
    if options:
        body["deleteOptions"] = options
    return body


def event(
    involved: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    event_type: str,
    component: str,
    now: datetime,
) -> Obj:
    """A core/v1 Event about `involved`; a cluster-scoped object's goes to `default`, as kubectl
    expects."""
    meta = involved.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    stamp = rfc3339(now)
    ref = {
        "kind": involved.get("kind", ""),
        "apiVersion": involved.get("apiVersion", "v1"),
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "uid": meta.get("uid", ""),
    }
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{ref['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {k: v for k, v in ref.items() if v},
        "reason": reason,
        "message": message,
        "type": event_type,
        "count": 1,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
    }
