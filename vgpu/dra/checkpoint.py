"""The driver's checkpoint of prepared claims, so a restarted driver answers as before.

The kubelet may call `NodePrepareResources` again for a claim it prepared before (after its own
restart, or when a second pod shares the claim) and calls `NodeUnprepareResources` for claims
prepared by an earlier run of the driver. The checkpoint keeps, per claim UID, what was prepared:
a repeated prepare returns the recorded answer without reading the API server again, and
unprepare knows which CDI spec to remove. The file is replaced atomically (write, fsync, rename),
so a crash leaves the old or the new checkpoint, never half of one; an unreadable file is
reported and set aside rather than trusted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vgpu.api.decode import DECODING_ERRORS, DecodeError, brief, load_json
from vgpu.dra.prepare import PreparedClaim, PreparedDevice

log = logging.getLogger(__name__)
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


class Checkpoint:
    """Prepared claims by UID, persisted to `path` on every change. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._claims: dict[str, PreparedClaim] = self._load()

    def _load(self) -> dict[str, PreparedClaim]:
        try:
            with self.path.open(encoding="utf-8", errors="replace") as f:
                text = f.read(MAX_CHECKPOINT_CHARS + 1)
            doc: Any = load_json(text, str(self.path), MAX_CHECKPOINT_CHARS)
            if doc.get("v") != VERSION:
                raise DecodeError(f"field v: not version {VERSION}")
            return {str(uid): _decode(str(uid), raw) for uid, raw in doc["claims"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, DecodeError, KeyError, AttributeError, *DECODING_ERRORS) as e:
            aside = self.path.with_suffix(".corrupt")
            log.error("checkpoint %s is unreadable (%s); moved to %s", self.path, brief(e), aside)
            with contextlib.suppress(OSError):
                self.path.replace(aside)
            return {}

    def _save(self) -> None:
        doc = {"v": VERSION, "claims": {u: _encode(c) for u, c in sorted(self._claims.items())}}
        tmp = self.path.with_suffix(".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)

    def get(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            return self._claims.get(uid)

    def put(self, claim: PreparedClaim) -> None:
        with self._lock:
            self._claims[claim.uid] = claim
            self._save()

    def remove(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            claim = self._claims.pop(uid, None)
            if claim is not None:
                self._save()
            return claim

    def __iter__(self) -> Iterator[PreparedClaim]:
        with self._lock:
            return iter(list(self._claims.values()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._claims)
