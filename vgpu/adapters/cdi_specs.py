"""The CDI spec files of prepared DRA claims: one `<driver>-<claim uid>.json` per claim.

The container runtime reads a claim's spec (its device nodes, mounts and variables) from the CDI
directory when a container using the claim starts, so a spec is replaced atomically (temporary
file, then `rename`): the runtime sees the old spec or the new one, never half of one. The spec's
content is `vgpu.dra.prepare`'s; this module only writes and removes the files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vgpu.api.dra import DRIVER
from vgpu.dra.prepare import PreparedClaim


class CdiSpecs:
    """The spec files under one CDI directory (created on the first write)."""

    def __init__(self, cdi_dir: Path) -> None:
        self.dir = cdi_dir

    def path(self, uid: str) -> Path:
        return self.dir / f"{DRIVER}-{uid}.json"

    def write(self, claim: PreparedClaim) -> None:
        """Write (or rewrite: idempotent) the claim's spec; raises OSError."""
        path = self.path(claim.uid)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(claim.cdi_spec, indent=1, sort_keys=True))
        os.replace(tmp, path)

    def remove(self, uid: str) -> None:
        """Remove the claim's spec; one never written is already gone."""
        self.path(uid).unlink(missing_ok=True)
