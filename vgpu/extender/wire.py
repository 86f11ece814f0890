"""The extender's JSON wire types (k8s.io/kube-scheduler/extender/v1), with PascalCase names.

Go encodes these structs without JSON tags, so the scheduler sends `Pod`, `NodeNames`, `PodUID`
... and reads back `NodeNames`, `FailedNodes`, `FailedAndUnresolvableNodes`, `Error`, and bare
`[{"Host", "Score"}]` lists. Go decodes case-insensitively, so requests are matched that way too.
A filter result always carries an explicit node list: with both `Nodes` and `NodeNames` null the
scheduler would drop every node.

Malformed requests raise `BadRequest` (answered with HTTP 400); nothing else is validated here.

Requests name up to every node of the cluster (5,000 names), so decoding and encoding are on the
hot path: `orjson` is used when installed (the `extender` extra), the standard library otherwise,
with the same results; priorities are written per group of equal scores (`Grouped`). Both
through `vgpu.adapters.fastjson`, which the watches use too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any

from vgpu.adapters.fastjson import dumps as _dumps
from vgpu.adapters.fastjson import loads as _loads
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


def load_request(body: bytes) -> Obj:
    """A request body as a JSON object with lower-cased keys (Go decodes case-insensitively);
    raises `BadRequest`."""
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


class NamesMemo:
    """The NodeNames member of the last request of one verb, as sent and as parsed.

    kube-scheduler writes the pod first and the node names last (Go encodes struct fields in
    order), and with every node feasible it sends the same names pod after pod. A body ending
    with the remembered member is parsed without it (the pod only), and the remembered list is
    used as the request's names: 5,000 names are neither decoded nor compared again. The list
    is shared between requests, so nothing may modify `ExtenderArgs.node_names`."""

    def __init__(self, *, learn: bool = True) -> None:
        self._last: tuple[bytes, list[str]] = (b"", [])
        self._learn = learn
        """Whether parsed requests are remembered (else only what `expect` is told)."""

    def expect(self, names: list[str]) -> None:
        """The next request will likely name exactly these (prioritize after filter: the
        filter's survivors, encoded as the filter's reply encoded them)."""
        self._last = (_NAMES_MEMBER[:-1] + _dumps(names) + b"}", names)

    def repeated(self, body: bytes) -> tuple[bytes, list[str]] | None:
        """(the body without the names, the names) when the body ends with the last names."""
        tail, names = self._last
        if tail and len(body) > len(tail) and body.endswith(tail):
            return body[: len(body) - len(tail)] + b"}", names
        return None

    def remember(self, body: bytes, names: list[str]) -> None:
        """Keep the body's NodeNames member if it is the last member and holds `names`."""
        start = body.rfind(_NAMES_MEMBER)
        if start < 0 or not self._learn:
            return
        tail = body[start:]
        try:
            member = _loads(b"{" + tail[1:])
        except (ValueError, UnicodeDecodeError):
            return
        if member == {"NodeNames": names}:
            self._last = (tail, names)


_NAMES_MEMBER = b',"NodeNames":['


def parse_extender_args(body: bytes, memo: NamesMemo | None = None) -> ExtenderArgs:
    """Parse `ExtenderArgs`; NodeNames (nodeCacheCapable) or Nodes.items names are required."""
    repeated = memo.repeated(body) if memo is not None else None
    if repeated is not None:
        with suppress(BadRequest):  # not an object without the names: parse it all below
            rest = load_request(repeated[0])
            if "nodenames" not in rest:
                return ExtenderArgs(_pod_of(rest), repeated[1])
    doc = load_request(body)
    pod = _pod_of(doc)
    names = doc.get("nodenames")
    nodes = doc.get("nodes")
    if names is not None:
        if not isinstance(names, list) or not _all_strings(names):
            raise BadRequest("NodeNames: expected a list of node names")
        if memo is not None:
            memo.remember(body, names)
        return ExtenderArgs(pod, names)
    if isinstance(nodes, dict) and isinstance(nodes.get("items"), list):
        items = [n for n in nodes["items"] if isinstance(n, dict)]
        return ExtenderArgs(pod, [str((n.get("metadata") or {}).get("name")) for n in items], items)
    raise BadRequest("NodeNames or Nodes: one of them must be given")


def _pod_of(doc: Obj) -> Obj:
    pod = doc.get("pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise BadRequest("Pod: expected a v1.Pod object with metadata")
    return pod


def parse_binding_args(body: bytes) -> BindingArgs:
    """Parse `ExtenderBindingArgs`."""
    doc = load_request(body)
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
    """Prioritize output as plain lists: `scores[i]` (0..10) is the score of `hosts[i]`, in
    request order (the few-host replies: a held pod, a pod without vGPU)."""

    hosts: list[str]
    scores: list[int]

    def as_dict(self) -> dict[str, int]:
        """Scores by host."""
        return dict(zip(self.hosts, self.scores, strict=True))


@dataclass(frozen=True, slots=True)
class Grouped:
    """Prioritize output by score: `groups` holds (score 1..10, hosts), hosts being names that
    JSON needs no escaping for; `odd` holds (host, score) for any other name. Hosts of `names`
    in neither score 0, and the reply leaves them out (see `encode_priorities`)."""

    names: list[str]
    groups: list[tuple[int, set[str]]]
    odd: list[tuple[str, int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        """Scores by host, 0s included, in request order."""
        scores = dict.fromkeys(self.names, 0)
        for score, hosts in self.groups:
            scores.update(dict.fromkeys(hosts, score))
        scores.update(self.odd)
        return scores

    def encode(self) -> bytes:
        """The HostPriorityList: one join per group (names written as they are)."""
        parts = [
            '{"Host":"' + f'","Score":{s}}},{{"Host":"'.join(hosts) + f'","Score":{s}}}'
            for s, hosts in self.groups
        ]
        parts += [f'{{"Host":{encode_basestring_ascii(h)},"Score":{s}}}' for h, s in self.odd if s]
        return ("[" + ",".join(parts) + "]").encode()


def encode_priorities(result: Grouped | Priorities | Mapping[str, int]) -> bytes:
    """`HostPriorityList` JSON: a bare list of {"Host", "Score"} (scores are ints).

    Hosts scoring 0 are left out: kube-scheduler adds `Score × weight` for each host the list
    names and nothing for the others, so the outcome is the same, and the reply is often half as
    long (min-max scaling gives the least suitable nodes 0)."""
    if isinstance(result, Grouped):
        return result.encode()
    if isinstance(result, Priorities):
        pairs = zip(result.hosts, result.scores, strict=True)
    else:
        pairs = zip(result.keys(), result.values(), strict=True)
    enc = encode_basestring_ascii
    items = [f'{{"Host":{enc(h)},"Score":{int(s)}}}' for h, s in pairs if s]
    return ("[" + ",".join(items) + "]").encode()


def encode_binding_result(error: str) -> bytes:
    """`ExtenderBindingResult` JSON."""
    return json.dumps({"Error": error}).encode()
