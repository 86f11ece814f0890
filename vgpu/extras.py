"""How to install an optional extra, in the words every hint uses.

vgpu is installed from a checkout (it is not on PyPI), so a hint naming `vgpu[cli]` sends a
newcomer to a package index that has no such project; the hint names the checkout.
"""

from __future__ import annotations

ALL_DAEMONS = "node,extender,cli"
"""The extras of a full install (daemons and tools)."""


def install_hint(extra: str) -> str:
    """The command that installs `extra` (comma-separated extras too), run in a vgpu checkout."""
    return f"pip install '.[{extra}]' (in a vgpu checkout)"
