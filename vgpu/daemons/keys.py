"""Loading the assignment signing key, the same way in the extender and the node agent.

Both daemons must read the shared Secret identically (trailing whitespace stripped) and fall back to
the *same* development key, or a dev cluster would refuse every assignment. The placeholder that
the old `daemonset/assignment-key.yaml` shipped is refused outright: running with a key everyone
knows is the same as running with none.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from vgpu.core.errors import ConfigError

log = logging.getLogger(__name__)

KEY_ENV = "VGPU_ASSIGNMENT_KEY"
DEV_KEY = b"vgpu-development-key-do-not-use-in-production"
PLACEHOLDER_PREFIX = b"REPLACE-ME"


def load_assignment_key(path: str | Path | None) -> bytes:
    """The key from `path`, else from $VGPU_ASSIGNMENT_KEY, else the development key (warned)."""
    if path:
        try:
            key = Path(path).read_bytes().strip()
        except OSError as err:
            raise ConfigError(f"--assignment-key-file: cannot read {path}: {err.strerror}") from err
        where = f"--assignment-key-file {path}"
    elif env := os.environ.get(KEY_ENV):
        key, where = env.strip().encode(), f"${KEY_ENV}"
    else:
        log.warning(
            "NO ASSIGNMENT KEY CONFIGURED: using the public development key; anyone can forge GPU "
            "assignments. Set --assignment-key-file (or $%s) from the Secret shared by the "
            "extender and the node agents.",
            KEY_ENV,
        )
        return DEV_KEY
    if not key:
        raise ConfigError(f"{where} is empty; put the shared key in it (openssl rand -hex 32)")
    if key.startswith(PLACEHOLDER_PREFIX):
        raise ConfigError(
            f"{where} still holds the placeholder that older daemonset/ files shipped; "
            "generate a real key (openssl rand -hex 32) and update the Secret"
        )
    return key
