"""The project's error hierarchy: every failure vgpu raises on purpose is a `VgpuError`.

Adapters translate third-party exceptions into these (with `raise ... from e`) so daemons and
the CLI handle one family of errors and map it to log lines and exit codes. "Does not fit" is
not an error: the core returns it as a value.
"""

from __future__ import annotations


class VgpuError(Exception):
    """Root of every error vgpu raises on purpose."""


class ConfigError(VgpuError):
    """Configuration is missing or invalid; the message names the setting and the fix."""


class NotFound(VgpuError):
    """The object the caller named does not exist."""


class Conflict(VgpuError):
    """A write lost an optimistic-concurrency race or hit an existing object; re-read, retry."""


class Unavailable(VgpuError):
    """A dependency (API server, kubelet, driver) is unreachable or failing; retry later."""


class PermissionDenied(VgpuError):
    """The caller's credentials are rejected or lack the needed permission."""
