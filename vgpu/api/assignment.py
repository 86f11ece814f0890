"""The assignment record: what the extender writes on a pod at bind and the node agent verifies.

Two annotations, merged into the pod atomically with its Binding (see docs/handshake.md):

* ``vgpu.io/assignment``: canonical JSON (sorted keys, no spaces) of the pod, its UID, the node and
  per container the GPU shares;
* ``vgpu.io/assignment-signature``: hex HMAC-SHA256 of that exact text under a key shared by the
  extender and the agents, so users cannot forge or copy an assignment.

Pure: JSON and hashlib only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping

from vgpu.api.admitted import ADMITTED as ADMITTED  # re-exported: one definition
from vgpu.api.decode import MAX_ASSIGNMENT_CHARS, guard, load_json
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare
from vgpu.core.units import MMIB_PER_MIB

ASSIGNMENT = "vgpu.io/assignment"
SIGNATURE = "vgpu.io/assignment-signature"
VERSION = 1


def encode(assignment: Assignment) -> str:
    """Canonical JSON text of an assignment (memory in MiB, rounded up)."""
    containers = {
        c.name: [
            {
                "uuid": s.uuid,
                "cores": s.cores,
                "memoryMiB": -(-s.memory_mmib // MMIB_PER_MIB),
                "memoryMMiB": s.memory_mmib,
            }
            for s in c.shares
        ]
        for c in assignment.containers
    }
    doc = {
        "v": VERSION,
        "pod": assignment.pod,
        "uid": assignment.uid,
        "node": assignment.node,
        "cpuMilli": assignment.cpu_milli,
        "memoryMiB": assignment.memory_mib,
        "containers": containers,
    }
    if assignment.reused:  # only pods whose later containers reuse init containers' devices
        doc["reused"] = [
            {"uuid": s.uuid, "cores": s.cores, "memoryMMiB": s.memory_mmib}
            for s in assignment.reused
        ]
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def sign(text: str, key: bytes) -> str:
    """Hex HMAC-SHA256 of the assignment text."""
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def binding_annotations(assignment: Assignment, key: bytes) -> dict[str, str]:
    """The two annotations to put on the Binding. Raises `InvalidRequest` for an assignment
    longer than `MAX_ASSIGNMENT_CHARS`, the bound `verify` (the node agent) holds it to: the
    extender must not bind what every agent would then call forged."""
    text = encode(assignment)
    if len(text) > MAX_ASSIGNMENT_CHARS:
        raise InvalidRequest(
            ASSIGNMENT,
            f"{len(text)} characters, more than the {MAX_ASSIGNMENT_CHARS} a node agent reads",
            "give the pod fewer vGPU containers, or shorter container names",
        )
    return {ASSIGNMENT: text, SIGNATURE: sign(text, key)}


def _field(doc: Mapping[str, object], name: str, kind: type) -> object:
    value = doc.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidRequest(
            f"{ASSIGNMENT}.{name}", f"missing or not a {kind.__name__}", "re-bind the pod"
        )
    return value


def _shares(name: str, raw: object) -> tuple[GpuShare, ...]:
    if not isinstance(raw, list):
        raise InvalidRequest(f"{ASSIGNMENT}.containers.{name}", "not a list", "re-bind the pod")
    shares = []
    for i, item in enumerate(raw):
        where = f"{ASSIGNMENT}.containers.{name}[{i}]"
        if not isinstance(item, dict):
            raise InvalidRequest(where, "not an object", "re-bind the pod")
        uuid, cores, mmib = item.get("uuid"), item.get("cores"), item.get("memoryMMiB")
        if not isinstance(uuid, str) or not isinstance(cores, int) or not isinstance(mmib, int):
            raise InvalidRequest(where, "needs uuid, cores and memoryMMiB", "re-bind the pod")
        shares.append(GpuShare(GpuUUID(uuid), cores, mmib))
    return tuple(shares)


def _unreadable(message: str) -> InvalidRequest:
    field, _, problem = message.partition(": ")
    return InvalidRequest(field, problem, "re-bind the pod")


def decode(text: object) -> Assignment:
    """Parse an assignment annotation; raises `InvalidRequest` naming the bad field, and nothing
    else whatever the value (`vgpu.api.decode`)."""
    doc = load_json(text, ASSIGNMENT, MAX_ASSIGNMENT_CHARS, _unreadable)
    with guard(ASSIGNMENT, _unreadable):
        return _assignment(doc)


def _assignment(doc: object) -> Assignment:
    if not isinstance(doc, dict):
        raise InvalidRequest(ASSIGNMENT, "not a JSON object", "re-bind the pod")
    if doc.get("v") != VERSION:
        raise InvalidRequest(f"{ASSIGNMENT}.v", f"unsupported version {doc.get('v')!r}", "upgrade")
    containers = _field(doc, "containers", dict)
    assert isinstance(containers, dict)
    return Assignment(
        pod=PodKey(str(_field(doc, "pod", str))),
        node=NodeName(str(_field(doc, "node", str))),
        cpu_milli=int(_field(doc, "cpuMilli", int)),  # type: ignore[call-overload]
        memory_mib=int(_field(doc, "memoryMiB", int)),  # type: ignore[call-overload]
        containers=tuple(
            ContainerAssignment(str(n), _shares(str(n), v)) for n, v in containers.items()
        ),
        uid=str(_field(doc, "uid", str)),
        reused=_shares("reused", doc["reused"]) if "reused" in doc else (),
    )


def verify(pod_annotations: Mapping[str, str], key: bytes) -> Assignment | None:
    """The pod's assignment if present and correctly signed under `key`, else None."""
    text = pod_annotations.get(ASSIGNMENT)
    signature = pod_annotations.get(SIGNATURE, "")
    if not isinstance(text, str) or not isinstance(signature, str) or not signature.isascii():
        return None
    try:
        if len(text) > MAX_ASSIGNMENT_CHARS or not hmac.compare_digest(sign(text, key), signature):
            return None
    except UnicodeEncodeError:  # a lone surrogate: JSON can carry one, UTF-8 cannot
        return None
    try:
        return decode(text)
    except InvalidRequest:
        return None
