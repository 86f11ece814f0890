"""The project's exception hierarchy.

Real failures raise a subclass of `VgpuError`; adapters translate third-party exceptions into these
with ``raise ... from e``. "Does not fit" is never an exception: it is a `fit.Verdict` value.
"""

from __future__ import annotations


class VgpuError(Exception):
    """Root of every error vgpu raises on purpose."""


class InvalidRequest(VgpuError):
    """A pod, container or trace row asks for something that can never be valid.

    The message names the field and says how to fix it.
    """

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        text = f"{field}: {problem}"
        if fix:
            text += f" ({fix})"
        super().__init__(text)


class InvalidInventory(VgpuError):
    """A node's GPU inventory is malformed or inconsistent."""


class UnknownNode(VgpuError):
    """A node name the cluster state does not hold."""


class UnknownPod(VgpuError):
    """A pod key the ledger does not hold."""


class Conflict(VgpuError):
    """An operation contradicts what is already held: a second, different assumption in the ledger,
    or a write that lost an optimistic-concurrency race / hit an existing object (re-read, retry)."""


class StateError(VgpuError):
    """Cluster state was used wrongly (e.g. revert without fork)."""


class ConfigError(VgpuError):
    """Configuration is missing or invalid; the message names the setting and the fix."""


class NotFound(VgpuError):
    """The object the caller named does not exist."""
