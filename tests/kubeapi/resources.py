"""The resource kinds the fake API server knows, and the Status errors it answers with.

A `Resource` says where a kind lives on the URL tree and how the real API server treats it:
whether it is namespaced, whether `status` is a separate subresource (so main-resource writes
cannot change it and status writes cannot change anything else), whether DELETE answers with the
object or with a Status, and which field selectors it accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool = False
    builtin: bool = True  # built-in kinds accept strategic merge patch; CRDs answer 415
    returns_deleted_object: bool = False
    # A status write also changes labels and annotations (the real pod status strategy resets
    # only spec, deletionTimestamp and ownerReferences: pkg/registry/core/pod/strategy.go).
    status_keeps_metadata: bool = False
    field_labels: frozenset[str] = field(default_factory=frozenset)

    @property
    def api_version(self) -> str:
        return self.version if not self.group else f"{self.group}/{self.version}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def qualified(self) -> str:
        """`pods` or `leases.coordination.k8s.io`, as the real server names it in messages."""
        return self.plural if not self.group else f"{self.plural}.{self.group}"

    def supports_field(self, label: str) -> bool:
        return label in _COMMON_FIELDS or label in self.field_labels


NODES = Resource(
    "",
    "v1",
    "nodes",
    "Node",
    namespaced=False,
    has_status=True,
    field_labels=frozenset({"spec.unschedulable"}),
)
PODS = Resource(
    "",
    "v1",
    "pods",
    "Pod",
    namespaced=True,
    has_status=True,
    returns_deleted_object=True,
    status_keeps_metadata=True,
    field_labels=frozenset(
        {
            "spec.nodeName",
            "spec.schedulerName",
            "status.phase",
            "spec.restartPolicy",
            "status.nominatedNodeName",
        }
    ),
)
EVENTS = Resource(
    "",
    "v1",
    "events",
    "Event",
    namespaced=True,
    field_labels=frozenset(
        {
            "involvedObject.kind",
            "involvedObject.name",
            "involvedObject.namespace",
            "involvedObject.uid",
            "reason",
            "type",
        }
    ),
)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
PODGROUPS = Resource(
    "scheduling.x-k8s.io",
    "v1alpha1",
    "podgroups",
    "PodGroup",
    namespaced=True,
    has_status=True,
    builtin=False,
    returns_deleted_object=True,
)

RESOURCESLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
RESOURCECLAIMS = Resource(
    "resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, has_status=True
)

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
DEFAULT_RESOURCES: tuple[Resource, ...] = (
    NODES,
    NAMESPACES,
    PODS,
    EVENTS,
    CONFIGMAPS,
    LEASES,
    PODGROUPS,
    RESOURCESLICES,
    RESOURCECLAIMS,
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, True),
)

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def default_reason(code: int) -> str:
    return _REASONS.get(code, "Unknown")


class ApiError(Exception):
    """An error the fake server reports as a `kind: Status` body with the matching HTTP code."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or default_reason(code)
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(
        404,
        f'{res.qualified} "{name}" not found',
        "NotFound",
        {"name": name, "group": res.group, "kind": res.plural},
    )


def already_exists(res: Resource, name: str) -> ApiError:
    return ApiError(
        409,
        f'{res.qualified} "{name}" already exists',
        "AlreadyExists",
        {"name": name, "group": res.group, "kind": res.plural},
    )


def conflict(res: Resource, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}',
        "Conflict",
        {"name": name, "group": res.group, "kind": res.plural},
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def success_status(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details:
        body["details"] = details
    return body
