"""Kubernetes client errors translated into vgpu's own error hierarchy.

The official client raises `ApiException` with an HTTP status and a `Status` JSON body; callers
should not need to know that. Each status class maps to one `KubeError` subclass (all of them
`VgpuError`s), so callers branch on meaning (conflict, missing, transient) instead of codes.
"""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

from vgpu.core.errors import VgpuError


class KubeError(VgpuError):
    """The API server refused or failed a request; `status` is the HTTP code (None: no reply)."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class KubeNotFound(KubeError):
    """404: the object does not exist."""


class KubeConflict(KubeError):
    """409: stale resourceVersion, already exists, or pod already bound. Re-read and retry."""


class KubeUnavailable(KubeError):
    """5xx, 429, timeouts and connection errors: transient, retry with backoff."""


class KubeForbidden(KubeError):
    """401/403: bad credentials or missing RBAC permission."""


class KubeExpired(KubeError):
    """410: the resourceVersion is too old; list again."""


class KubeInvalid(KubeError):
    """400/415/422: the server rejected the request as malformed (a bug on our side)."""


class KubeConfigMissing(KubeError):
    """Neither in-cluster credentials nor a usable kubeconfig were found."""


_BY_STATUS: dict[int, type[KubeError]] = {
    401: KubeForbidden,
    403: KubeForbidden,
    404: KubeNotFound,
    409: KubeConflict,
    410: KubeExpired,
    400: KubeInvalid,
    415: KubeInvalid,
    422: KubeInvalid,
    429: KubeUnavailable,
}


def translate(what: str, e: ApiException) -> KubeError:
    """Map an `ApiException` to our error, keeping the Status message and reason."""
    status = int(e.status or 0)
    reason, message = str(e.reason or ""), str(e.reason or "")
    try:
        body = json.loads(e.body or "")
        reason, message = body.get("reason", reason), body.get("message", message)
    except (ValueError, AttributeError):
        pass
    kind = _BY_STATUS.get(status) or (KubeUnavailable if status >= 500 or not status else KubeError)
    return kind(f"{what}: {status} {reason}: {message}", status=status or None, reason=reason)
