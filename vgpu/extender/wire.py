"""The extender's JSON wire types (k8s.io/kube-scheduler/extender/v1), with PascalCase names.

Go encodes these structs without JSON tags, so the scheduler sends `Pod`, `NodeNames`, `PodUID`
... and reads back `NodeNames`, `FailedNodes`, `FailedAndUnresolvableNodes`, `Error`, and bare
`[{"Host", "Score"}]` lists. Go decodes case-insensitively, so requests are matched that way too.
A filter result always carries an explicit node list: with both `Nodes` and `NodeNames` null the
scheduler would drop every node.

Malformed requests raise `BadRequest` (answered with HTTP 400); nothing else is validated here.

Requests name up to every node of the cluster (5,000 names), so decoding and encoding are on the
hot path: `orjson` is used when installed (the `extender` extra), the standard library otherwise,
with the same results; priorities are written from per-host text, without a dict per host.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from json.encoder import encode_basestring_ascii
from operator import getitem
from typing import Any

from vgpu.core.errors import VgpuError

Obj = dict[str, Any]

_fast_loads: Callable[[bytes], Any] | None
_fast_dumps: Callable[[Any], bytes] | None
try:
    import orjson

    _fast_loads, _fast_dumps = orjson.loads, orjson.dumps
except ImportError:  # pragma: no cover - orjson is optional
    _fast_loads = _fast_dumps = None


def _loads(body: bytes) -> Any:
    if _fast_loads is not None:
        try:
            return _fast_loads(body)
        except ValueError:
            pass  # what orjson refuses (NaN, huge ints) the standard library may accept
    return json.loads(body)


def _dumps(doc: Any) -> bytes:
    if _fast_dumps is not None:
        return _fast_dumps(doc)
    return json.dumps(doc, separators=(",", ":")).encode()


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
        doc = _loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequest(f"request body is not JSON: {err}") from err
    if not isinstance(doc, dict):
        raise BadRequest("request body must be a JSON object")
    return {k.lower(): v for k, v in doc.items()}


def _all_strings(items: list[Any]) -> bool:
    """Whether every item is a str (joining them is the cheapest check CPython offers)."""
    try:
        "".join(items)
    except TypeError:
        return False
    return True


def parse_extender_args(body: bytes) -> ExtenderArgs:
    """Parse `ExtenderArgs`; NodeNames (nodeCacheCapable) or Nodes.items names are required."""
    doc = _load(body)
    pod = doc.get("pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise BadRequest("Pod: expected a v1.Pod object with metadata")
    names = doc.get("nodenames")
    nodes = doc.get("nodes")
    if names is not None:
        if not isinstance(names, list) or not _all_strings(names):
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
    return _dumps(doc)


@dataclass(frozen=True, slots=True)
class Priorities:
    """Prioritize output: `scores[i]` is the score of `hosts[i]`, in request order; scores are
    ints in 0..10 (the extender's range), which the encoder relies on. `texts`, when given,
    holds each entry already encoded (`host_fragments(hosts[i])[scores[i]]`)."""

    hosts: list[str]
    scores: list[int]
    texts: list[str] | None = None

    def as_dict(self) -> dict[str, int]:
        """Scores by host."""
        return dict(zip(self.hosts, self.scores, strict=True))


_FRAGMENTS: dict[str, tuple[str, ...]] = {}
_MAX_FRAGMENTS = 200_000


def host_fragments(host: str) -> tuple[str, ...]:
    """The host's `{"Host":…,"Score":s}` text for each score 0..10 (built once per host)."""
    found = _FRAGMENTS.get(host)
    if found is None:
        if len(_FRAGMENTS) > _MAX_FRAGMENTS:
            _FRAGMENTS.clear()
        quoted = encode_basestring_ascii(host)
        found = _FRAGMENTS[host] = tuple(f'{{"Host":{quoted},"Score":{s}}}' for s in range(11))
    return found


def fragments_of(hosts: list[str]) -> list[tuple[str, ...]]:
    """`host_fragments` of each host, looked up at C level once every host has been seen."""
    try:
        return list(map(_FRAGMENTS.__getitem__, hosts))
    except KeyError:
        return list(map(host_fragments, hosts))


def encode_priorities(result: Priorities | Mapping[str, int]) -> bytes:
    """`HostPriorityList` JSON: a bare list of {"Host", "Score"} (scores are ints).

    Hosts scoring 0 are left out: kube-scheduler adds `Score × weight` for each host the list
    names and nothing for the others, so the outcome is the same, and the reply is often half as
    long (min-max scaling gives the least suitable nodes 0). Each host's entries are kept as text
    per score, so a reply naming 5,000 hosts is one C-level join, not 5,000 dictionaries."""
    if isinstance(result, Priorities):
        hosts, scores = result.hosts, result.scores
        if result.texts is not None:
            return ("[" + ",".join(compress(result.texts, scores)) + "]").encode()
    else:
        hosts, scores = list(result), [int(s) for s in result.values()]
        if not set(scores) <= _SCORES:
            items = [
                f'{{"Host":{encode_basestring_ascii(h)},"Score":{s}}}'
                for h, s in zip(hosts, scores, strict=True)
                if s
            ]
            return ("[" + ",".join(items) + "]").encode()
    texts = compress(map(getitem, fragments_of(hosts), scores), scores)
    return ("[" + ",".join(texts) + "]").encode()


_SCORES = frozenset(range(11))


def encode_binding_result(error: str) -> bytes:
    """`ExtenderBindingResult` JSON."""
    return json.dumps({"Error": error}).encode()
