"""What the extender's queue leader says on its Lease: that it runs queues, and with which
configuration.

The leader keeps the last good queue configuration when the ConfigMap is refused, so the
ConfigMap alone cannot tell an operator what is in force; and an extender run without
`--queues-config` releases nothing, which the pods' gates alone cannot tell either. So each
pass the leader carries the annotation `vgpu.io/queues-in-force` on its leader Lease: its own
identity and the `queues.json` text it acts on. The report (`kubectl inspect vgpu --queues`)
reads it; a record naming another holder than the Lease's is an earlier leader's, not the
current one's. Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from vgpu.api.decode import DecodeError, load_json

IN_FORCE_ANNOTATION = "vgpu.io/queues-in-force"
QUEUED_EVENT = "VgpuQueued"
"""The reason of the Event the leader writes on a held pod when why it waits changes."""
MAX_RECORD_CHARS = 64 * 1024
"""The longest record: with the configuration's text it would be longer, the text is left off
(a Lease's annotations share 256 KiB) and the record says only that queues run. The reader
refuses anything longer, as it does every Lease annotation (`vgpu.api.decode`)."""


@dataclass(frozen=True, slots=True)
class InForce:
    holder: str
    """The leader's identity when it wrote the record."""
    text: str | None
    """The `queues.json` it acts on ("{}": no ConfigMap; None: too large to carry)."""


def encode_in_force(holder: str, text: str) -> str:
    """The annotation's value."""
    value = json.dumps({"holder": holder, "queuesJson": text}, sort_keys=True)
    if len(value) > MAX_RECORD_CHARS:  # measured encoded: escapes can lengthen the text
        value = json.dumps({"holder": holder}, sort_keys=True)
    return value


def decode_in_force(value: object) -> InForce | None:
    """The record an annotation carries; None when absent or unreadable (then the report says
    it cannot tell what is in force, never a guess)."""
    if not isinstance(value, str):
        return None
    try:
        doc = load_json(value, IN_FORCE_ANNOTATION, MAX_RECORD_CHARS)
    except DecodeError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("holder"), str):
        return None
    text = doc.get("queuesJson")
    return InForce(doc["holder"], text if isinstance(text, str) else None)
