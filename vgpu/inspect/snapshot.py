"""The saved-cluster file: what `--save-snapshot` writes and `--fake-cluster` reads.

Format (YAML or JSON; YAML shown)::

    apiVersion: vgpu.io/v1alpha1
    kind: ClusterSnapshot
    takenAt: "2025-01-01T12:00:00Z"     # optional, shown in the report header
    nodes: [<Node objects>]              # as the API server returns them
    pods: [<Pod objects>]
    podGroups: [<scheduling.x-k8s.io PodGroup objects>]   # optional
    events: [<InvalidPod Events of pods>]                 # optional
    extenderLease: <the extender's coordination.k8s.io Lease>   # optional

A `kind: List` of Nodes, Pods and PodGroups (the output of
`kubectl get nodes,pods -A -o yaml`) is accepted too. Saved snapshots are trimmed to what the
report reads (names, labels, vgpu and gang annotations, resources, node name, phase, container
states, the PodScheduled condition, the pods' nodeSelector, node affinity and tolerations,
node addresses, conditions, taints and cordon, the Events' reason and
message, the Lease's holder and times): no environment variables, commands or images, so a
snapshot can be attached to a bug report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.resources import DEFAULT_NAMES, ResourceNames
from vgpu.core.errors import VgpuError

API_VERSION = "vgpu.io/v1alpha1"
KIND = "ClusterSnapshot"

Obj = dict[str, Any]


class SnapshotError(VgpuError):
    """A snapshot file is unreadable or malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Obj, ...]
    pods: tuple[Obj, ...]
    pod_groups: tuple[Obj, ...] = ()
    taken_at: str = ""
    resource_slices: tuple[Obj, ...] = ()
    """resource.k8s.io ResourceSlices and ResourceClaims: DRA-mode nodes and their claims."""
    resource_claims: tuple[Obj, ...] = ()
    events: tuple[Obj, ...] = ()
    """InvalidPod Events: the extender's word on pods it cannot read (`vgpu.inspect.waiting`)."""
    extender_lease: Obj | None = None
    """The extender's leader Lease, None when there is none (`vgpu.inspect.lease`)."""
    lease_read: bool = False
    """Whether the Lease was looked for (and could be read): only then does its absence say
    the extender is down."""


def parse_document(text: str, source: str) -> Any:
    """JSON through `json.loads` (200x faster than PyYAML's pure-Python loader on a 1,000-node
    snapshot), anything else as YAML with libyaml's loader when PyYAML has it."""
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError:
            pass  # a YAML flow mapping, or broken JSON: let the YAML parser say where
    import yaml  # only YAML needs PyYAML

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise SnapshotError(f"{source}: not valid YAML or JSON ({e})") from e


def loads(text: str, *, source: str = "snapshot") -> Snapshot:
    """Parse a snapshot document (YAML or JSON)."""
    doc = parse_document(text, source)
    if not isinstance(doc, dict):
        raise SnapshotError(f"{source}: expected a mapping with kind {KIND} or List")
    kind = doc.get("kind")
    if kind == "List":
        return _from_list(doc, source)
    if kind != KIND:
        raise SnapshotError(f"{source}.kind: expected {KIND!r} or 'List', got {kind!r}")
    return Snapshot(
        nodes=_objects(doc, "nodes", source),
        pods=_objects(doc, "pods", source),
        pod_groups=_objects(doc, "podGroups", source),
        taken_at=str(doc.get("takenAt") or ""),
        resource_slices=_objects(doc, "resourceSlices", source),
        resource_claims=_objects(doc, "resourceClaims", source),
        events=_events(doc, source),
        extender_lease=_lease(doc, source),
        lease_read="extenderLease" in doc,
    )


def _events(doc: Mapping[str, Any], source: str) -> tuple[Obj, ...]:
    value = doc.get("events") or []
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise SnapshotError(f"{source}.events: expected a list of Event objects")
    return tuple(value)


def _lease(doc: Mapping[str, Any], source: str) -> Obj | None:
    value = doc.get("extenderLease")
    if value is not None and not isinstance(value, dict):
        raise SnapshotError(f"{source}.extenderLease: expected a Lease object or null")
    return value


def _from_list(doc: Mapping[str, Any], source: str) -> Snapshot:
    items = _objects(doc, "items", source)
    by_kind: dict[str, list[Obj]] = {"Node": [], "Pod": [], "PodGroup": []}
    for item in items:
        by_kind.setdefault(str(item.get("kind")), []).append(item)
    return Snapshot(
        tuple(by_kind["Node"]),
        tuple(by_kind["Pod"]),
        tuple(by_kind["PodGroup"]),
        resource_slices=tuple(by_kind.get("ResourceSlice", ())),
        resource_claims=tuple(by_kind.get("ResourceClaim", ())),
        events=tuple(by_kind.get("Event", ())),
    )


def _objects(doc: Mapping[str, Any], field: str, source: str) -> tuple[Obj, ...]:
    value = doc.get(field) or []
    if not isinstance(value, list):
        raise SnapshotError(f"{source}.{field}: expected a list of objects")
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
            raise SnapshotError(f"{source}.{field}[{i}]: expected an object with metadata")
    return tuple(value)


def dumps(
    snapshot: Snapshot, *, as_json: bool = False, names: ResourceNames = DEFAULT_NAMES
) -> str:
    """Serialise a snapshot, trimmed (see the module docstring); `names` says which node
    annotation holds the inventory."""
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "takenAt": snapshot.taken_at,
        "nodes": [trim_node(n, names) for n in snapshot.nodes],
        "pods": [trim_pod(p) for p in snapshot.pods],
        "podGroups": [_trim_meta(g) | {"spec": g.get("spec", {})} for g in snapshot.pod_groups],
    }
    if snapshot.events:
        doc["events"] = [trim_event(e) for e in snapshot.events]
    if snapshot.lease_read:
        lease = snapshot.extender_lease
        doc["extenderLease"] = (
            None if lease is None else _trim_meta(lease) | {"spec": lease.get("spec", {})}
        )
    if snapshot.resource_slices:  # DRA mode: the GPUs and claims as the API server has them
        doc["resourceSlices"] = [
            _trim_meta(s) | {"spec": s.get("spec", {})} for s in snapshot.resource_slices
        ]
        doc["resourceClaims"] = [
            _trim_meta(c) | {"status": c.get("status", {})} for c in snapshot.resource_claims
        ]
    if as_json:
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"
    import yaml

    return str(yaml.safe_dump(doc, sort_keys=True, default_flow_style=False))


_KEEP_ANNOTATION_PREFIXES = ("vgpu.io/", "scheduling.k8s.io/", "pod-group.scheduling")


def _trim_meta(obj: Mapping[str, Any], also: str = "") -> Obj:
    meta = obj.get("metadata") or {}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k.startswith(_KEEP_ANNOTATION_PREFIXES) or k == also
    }
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "labels") if meta.get(k)}
    if meta.get("deletionTimestamp"):
        kept["deletionTimestamp"] = meta["deletionTimestamp"]
    if annotations:
        kept["annotations"] = annotations
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", ""),
        "metadata": kept,
    }


def trim_node(node: Mapping[str, Any], names: ResourceNames = DEFAULT_NAMES) -> Obj:
    status = node.get("status") or {}
    kept = {k: status[k] for k in ("addresses", "conditions", "capacity") if k in status}
    spec = node.get("spec") or {}
    kept_spec = {k: spec[k] for k in ("taints", "unschedulable") if spec.get(k)}  # nodefit
    trimmed = _trim_meta({"kind": "Node", **node}, names.inventory) | {"status": kept}
    return trimmed | {"spec": kept_spec} if kept_spec else trimmed


def trim_pod(pod: Mapping[str, Any]) -> Obj:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}

    def containers(key: str) -> list[Obj]:
        return [
            {"name": c.get("name"), "resources": c.get("resources") or {}}
            for c in spec.get(key) or []
        ]

    kept_spec: Obj = {"containers": containers("containers")}
    if spec.get("initContainers"):
        kept_spec["initContainers"] = containers("initContainers")
    for key in ("nodeName", "schedulerName", "schedulingGates"):  # gates: a queue holds the pod
        if spec.get(key):
            kept_spec[key] = spec[key]
    for key in ("nodeSelector", "tolerations"):  # the nodes it may use (vgpu.api.nodefit)
        if spec.get(key):
            kept_spec[key] = spec[key]
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    if node_affinity:
        kept_spec["affinity"] = {"nodeAffinity": node_affinity}
    kept_status: Obj = {"phase": status.get("phase", "Pending")}
    scheduled = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
    if scheduled:  # its message is the scheduler's last word on a pending pod
        kept_status["conditions"] = scheduled
    for key in ("containerStatuses", "initContainerStatuses"):
        if status.get(key):
            kept_status[key] = [
                {"name": s.get("name"), "state": s.get("state") or {}} for s in status[key]
            ]
    return _trim_meta({"kind": "Pod", **pod}) | {"spec": kept_spec, "status": kept_status}


def trim_event(event: Mapping[str, Any]) -> Obj:
    """What the report reads of an Event: whom it is about, why, and when."""
    kept = {
        k: event[k]
        for k in ("reason", "message", "type", "lastTimestamp", "eventTime", "firstTimestamp")
        if event.get(k)
    }
    ref = event.get("involvedObject") or {}
    involved = {k: ref[k] for k in ("kind", "namespace", "name", "uid") if ref.get(k)}
    return {"apiVersion": "v1", "kind": "Event", "involvedObject": involved} | kept
