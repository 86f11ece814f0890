"""`vgpu.io/admitted`: the containers of a pod that the kubelet has admitted on its node.

The node agent writes it (`vgpu.node.handoff.admissions`) once Allocate has served every resource a
container asks: a compact JSON list of container names in name order, `["main","setup"]`. The
extender reads it to know which containers are still pending (invariant I of
docs/handshake.md) and `kubectl inspect vgpu` to show what is PENDING. Both read it here.

Hand-written values are read too: `true`, `*` or `all` for every container, or a comma-separated
list. A JSON object names the containers whose value is true (`{"a": true, "b": false}` admits
`a` only). Any other value admits nothing: a container not known to be admitted is counted
pending, which is the safe side for the hand-off (it only keeps other pods off look-alike asks).
A value that cannot be decoded (too long, an integer past Python's digit limit, deep nesting:
`vgpu.api.decode`) admits nothing either and says why in `problem`: the pod is still counted
with what its assignment holds, never forgotten. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.api.decode import MAX_ADMITTED_CHARS, DecodeError, check_size, guard

ADMITTED = "vgpu.io/admitted"
_EVERYONE = frozenset({"true", "*", "all"})


@dataclass(frozen=True, slots=True)
class Admitted:
    """What the annotation says: these containers, or every container of the pod."""

    names: frozenset[str] = frozenset()
    everyone: bool = False
    problem: str = ""
    """Why the value could not be read ("" when it could): report it, admit nothing."""

    def includes(self, container: str) -> bool:
        return self.everyone or container in self.names

    def among(self, containers: Iterable[str]) -> frozenset[str]:
        """The admitted ones of `containers`, plus any other name the annotation lists."""
        return frozenset(containers) if self.everyone else self.names


def encode_admitted(containers: Iterable[str]) -> str:
    """The annotation value the node agent writes."""
    return json.dumps(sorted(containers), separators=(",", ":"))


def read_admitted(value: object) -> Admitted:
    """Parse the annotation value (None or a non-string: nothing admitted); never raises."""
    try:
        return _read(value)
    except DecodeError as err:
        return Admitted(problem=str(err))


def _read(value: object) -> Admitted:
    if not isinstance(value, str) or not value.strip():
        return Admitted()
    text = value.strip()
    if text.lower() in _EVERYONE:
        return Admitted(everyone=True)
    check_size(text, ADMITTED, MAX_ADMITTED_CHARS, DecodeError)
    with guard(ADMITTED):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:  # not JSON: the hand-written comma-separated list
            return Admitted(_names(p.strip() for p in text.split(",") if p.strip()))
        if isinstance(doc, list):
            return Admitted(_names(str(x) for x in doc))
        if isinstance(doc, dict):
            return Admitted(_names(str(k) for k, v in doc.items() if v))
    return Admitted()


def _names(names: Iterable[str]) -> frozenset[str]:
    """Container names; a value longer than any pod's names cannot be one."""
    chosen = frozenset(names)
    if sum(len(n) for n in chosen) > MAX_ADMITTED_CHARS:
        raise DecodeError(f"{ADMITTED}: more than {MAX_ADMITTED_CHARS} characters of names")
    return chosen
