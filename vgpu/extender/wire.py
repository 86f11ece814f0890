"""The extender's JSON wire types (k8s.io/kube-scheduler/extender/v1), with PascalCase names.

Go encodes these structs without JSON tags, so the scheduler sends `Pod`, `NodeNames`, `PodUID`
... and reads back `NodeNames`, `FailedNodes`, `FailedAndUnresolvableNodes`, `Error`, and bare
`[{"Host", "Score"}]` lists. Go decodes case-insensitively, so requests are matched that way too.
A filter result always carries an explicit node list: with both `Nodes` and `NodeNames` null the
scheduler would drop every node.

Malformed requests raise `BadRequest` (answered with HTTP 400); nothing else is validated here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu.core.errors import VgpuError

Obj = dict[str, Any]


class BadRequest(VgpuError):
    """The request body is not what kube-scheduler sends; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """Filter and prioritize input: the pod and node names (or full nodes, without node cache)."""

    pod: Obj
    node_names: list[str]
    nodes: list[Obj] | None = None


@dataclass(frozen=True, slots=True)
class BindingArgs:
    """Bind input."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


@dataclass(slots=True)
class FilterResult:
    """Filter output; `passed` keeps input order."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""


def _load(body: bytes) -> Obj:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequest(f"request body is not JSON: {err}") from err
    if not isinstance(doc, dict):
        raise BadRequest("request body must be a JSON object")
    return {k.lower(): v for k, v in doc.items()}


def parse_extender_args(body: bytes) -> ExtenderArgs:
    """Parse `ExtenderArgs`; NodeNames (nodeCacheCapable) or Nodes.items names are required."""
    doc = _load(body)
    pod = doc.get("pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise BadRequest("Pod: expected a v1.Pod object with metadata")
    names = doc.get("nodenames")
    nodes = doc.get("nodes")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadRequest("NodeNames: expected a list of node names")
        return ExtenderArgs(pod, names)
    if isinstance(nodes, dict) and isinstance(nodes.get("items"), list):
        items = [n for n in nodes["items"] if isinstance(n, dict)]
        return ExtenderArgs(pod, [str((n.get("metadata") or {}).get("name")) for n in items], items)
    raise BadRequest("NodeNames or Nodes: one of them must be given")


def parse_binding_args(body: bytes) -> BindingArgs:
    """Parse `ExtenderBindingArgs`."""
    doc = _load(body)
    values = {}
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = doc.get(key.lower())
        if not isinstance(value, str) or (key != "PodUID" and not value):
            raise BadRequest(f"{key}: expected a non-empty string")
        values[key] = value
    return BindingArgs(values["PodName"], values["PodNamespace"], values["PodUID"], values["Node"])


def encode_filter(result: FilterResult, nodes: list[Obj] | None = None) -> bytes:
    """`ExtenderFilterResult` JSON (NodeNames, or Nodes when the request carried full nodes)."""
    doc: Obj = {
        "Nodes": None,
        "NodeNames": result.passed,
        "FailedNodes": result.failed,
        "FailedAndUnresolvableNodes": result.unresolvable,
        "Error": result.error,
    }
    if nodes is not None:
        keep = set(result.passed)
        doc["NodeNames"] = None
        doc["Nodes"] = {
            "metadata": {},
            "items": [n for n in nodes if (n.get("metadata") or {}).get("name") in keep],
        }
    return json.dumps(doc, separators=(",", ":")).encode()


def encode_priorities(scores: Mapping[str, int]) -> bytes:
    """`HostPriorityList` JSON: a bare list of {"Host", "Score"}."""
    return json.dumps(
        [{"Host": h, "Score": s} for h, s in scores.items()], separators=(",", ":")
    ).encode()


def encode_binding_result(error: str) -> bytes:
    """`ExtenderBindingResult` JSON."""
    return json.dumps({"Error": error}).encode()
