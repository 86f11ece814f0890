"""The driver's checkpoint of prepared claims as text: its format, written and read, with no I/O.

The kubelet may call `NodePrepareResources` again for a claim it prepared before (after its own
restart, or when a second pod shares the claim) and calls `NodeUnprepareResources` for claims
prepared by an earlier run of the driver. The checkpoint keeps, per claim UID, what was prepared:
a repeated prepare returns the recorded answer without reading the API server again, and
unprepare knows which CDI spec to remove. This module fixes the document (`encode_checkpoint`,
strict `decode_checkpoint`); the file that holds it, replaced atomically, is the adapter's
(`vgpu.adapters.dra_checkpoint`), so the DRA logic stays free of I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from vgpu.api.decode import DecodeError, load_json
from vgpu.dra.prepare import PreparedClaim, PreparedDevice

VERSION = 1
MAX_CHECKPOINT_CHARS = 64 << 20
"""A larger file is not read: a node's prepared claims are kilobytes."""


def _encode(claim: PreparedClaim) -> dict[str, Any]:
    return {
        "namespace": claim.namespace,
        "name": claim.name,
        "devices": [
            {
                "request": d.request,
                "pool": d.pool,
                "device": d.device,
                "shareID": d.share_id,
                "cdi": list(d.cdi_ids),
            }
            for d in claim.devices
        ],
        "cdiSpec": claim.cdi_spec,
    }


def _decode(uid: str, raw: dict[str, Any]) -> PreparedClaim:
    devices = tuple(
        PreparedDevice(
            str(d["request"]),
            str(d["pool"]),
            str(d["device"]),
            None if d.get("shareID") is None else str(d["shareID"]),
            tuple(str(c) for c in d.get("cdi") or ()),
        )
        for d in raw["devices"]
    )
    return PreparedClaim(uid, str(raw["namespace"]), str(raw["name"]), devices, raw["cdiSpec"])


def encode_checkpoint(claims: Iterable[PreparedClaim]) -> str:
    """The document for these claims, sorted by UID so equal sets write equal text."""
    by_uid = {c.uid: _encode(c) for c in claims}
    doc = {"v": VERSION, "claims": dict(sorted(by_uid.items()))}
    return json.dumps(doc, indent=1, sort_keys=True)


def decode_checkpoint(text: str, source: str) -> dict[str, PreparedClaim]:
    """Prepared claims by UID from a document; raises `DecodeError`, or one of
    `vgpu.api.decode.DECODING_ERRORS`, `KeyError` or `AttributeError` on a malformed one (the
    caller sets the file aside rather than trust any of it)."""
    doc: Any = load_json(text, source, MAX_CHECKPOINT_CHARS)
    if doc.get("v") != VERSION:
        raise DecodeError(f"field v: not version {VERSION}")
    return {str(uid): _decode(str(uid), raw) for uid, raw in doc["claims"].items()}
