"""Loading the assignment signing key, the same way in the extender and the node agent.

Both daemons must read the shared Secret identically (trailing whitespace stripped). Running with a
key everyone knows is the same as running with none, so both fail closed: without a configured key,
or with the public development key or the placeholder the old `daemonset/assignment-key.yaml`
shipped, they refuse to start. Only `--insecure-development-key` (one flag, defined here for both)
lets a local development cluster run on the public development key, with a loud warning.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from vgpu.core.errors import ConfigError

log = logging.getLogger(__name__)

KEY_ENV = "VGPU_ASSIGNMENT_KEY"
DEV_KEY = b"vgpu-development-key-do-not-use-in-production"
PLACEHOLDER_PREFIX = b"REPLACE-ME"
DEV_KEY_FLAG = "--insecure-development-key"
_NO_KEY = (
    "no assignment key configured: set --assignment-key-file (or ${env}) from the Secret shared "
    "by the extender and the node agents (openssl rand -hex 32); for a local development "
    "cluster only, {flag} runs on the public development key"
)


def add_development_key_flag(p: argparse.ArgumentParser) -> None:
    """The one opt-in to the public development key, the same in both daemons."""
    p.add_argument(
        DEV_KEY_FLAG,
        action="store_true",
        help="local development only: without a configured key, sign and verify assignments "
        "with the public development key (anyone can forge them); without this flag the "
        "daemon refuses to start with no key or that key",
    )


def load_assignment_key(path: str | Path | None, *, allow_development_key: bool = False) -> bytes:
    """The key from `path`, else from $VGPU_ASSIGNMENT_KEY; else, with `allow_development_key`
    only, the public development key (warned). Fails closed (`ConfigError`) otherwise."""
    if path:
        try:
            key = Path(path).read_bytes().strip()
        except OSError as err:
            raise ConfigError(f"--assignment-key-file: cannot read {path}: {err.strerror}") from err
        where = f"--assignment-key-file {path}"
    elif env := os.environ.get(KEY_ENV):
        key, where = env.strip().encode(), f"${KEY_ENV}"
    else:
        if not allow_development_key:
            raise ConfigError(_NO_KEY.format(env=KEY_ENV, flag=DEV_KEY_FLAG))
        log.warning(
            "INSECURE (%s): no assignment key configured, using the public development key; "
            "anyone can forge GPU assignments. Never use this outside a development cluster.",
            DEV_KEY_FLAG,
        )
        return DEV_KEY
    if not key:
        raise ConfigError(f"{where} is empty; put the shared key in it (openssl rand -hex 32)")
    if key.startswith(PLACEHOLDER_PREFIX):
        raise ConfigError(
            f"{where} still holds the placeholder that older daemonset/ files shipped; "
            "generate a real key (openssl rand -hex 32) and update the Secret"
        )
    if key == DEV_KEY and not allow_development_key:
        raise ConfigError(
            f"{where} holds the public development key, which anyone can sign with; generate a "
            f"real key (openssl rand -hex 32), or pass {DEV_KEY_FLAG} on a development cluster"
        )
    return key
