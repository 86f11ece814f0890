"""The file that holds the DRA driver's checkpoint of prepared claims (format: `vgpu.dra.checkpoint`).

The file is replaced atomically (write, fsync, rename), so a crash leaves the old or the new
checkpoint, never half of one; an unreadable file is reported and set aside rather than trusted,
so the driver starts empty instead of failing or acting on half a record.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from vgpu.api.decode import DECODING_ERRORS, DecodeError, brief
from vgpu.dra.checkpoint import MAX_CHECKPOINT_CHARS, decode_checkpoint, encode_checkpoint
from vgpu.dra.prepare import PreparedClaim

log = logging.getLogger(__name__)


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
            return decode_checkpoint(text, str(self.path))
        except FileNotFoundError:
            return {}
        except (OSError, DecodeError, KeyError, AttributeError, *DECODING_ERRORS) as e:
            aside = self.path.with_suffix(".corrupt")
            log.error("checkpoint %s is unreadable (%s); moved to %s", self.path, brief(e), aside)
            with contextlib.suppress(OSError):
                self.path.replace(aside)
            return {}

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            f.write(encode_checkpoint(self._claims.values()))
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
