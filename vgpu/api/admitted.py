"""`vgpu.io/admitted`: the containers of a pod that the kubelet has admitted on its node.

The node agent writes it (`vgpu.node.handoff`) once Allocate has served every resource a
container asks: a compact JSON list of container names in name order, `["main","setup"]`. The
extender reads it to know which containers are still pending (invariant I of
docs/handshake.md) and `kubectl inspect vgpu` to show what is PENDING. Both read it here.

Hand-written values are read too: `true`, `*` or `all` for every container, or a comma-separated
list. A JSON object names the containers whose value is true (`{"a": true, "b": false}` admits
`a` only). Any other value admits nothing: a container not known to be admitted is counted
pending, which is the safe side for the hand-off (it only keeps other pods off look-alike asks).
Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

ADMITTED = "vgpu.io/admitted"
_EVERYONE = frozenset({"true", "*", "all"})


@dataclass(frozen=True, slots=True)
class Admitted:
    """What the annotation says: these containers, or every container of the pod."""

    names: frozenset[str] = frozenset()
    everyone: bool = False

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
    if not isinstance(value, str) or not value.strip():
        return Admitted()
    text = value.strip()
    if text.lower() in _EVERYONE:
        return Admitted(everyone=True)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return Admitted(frozenset(p.strip() for p in text.split(",") if p.strip()))
    if isinstance(doc, list):
        return Admitted(frozenset(str(x) for x in doc))
    if isinstance(doc, dict):
        return Admitted(frozenset(str(k) for k, v in doc.items() if v))
    return Admitted()
