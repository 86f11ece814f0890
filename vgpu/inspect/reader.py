"""Reading a `Snapshot` from a live cluster through `KubeApi` (never through the extender).

Needs only read access: list nodes, list pods in all namespaces and, when pods name
scheduler-plugins PodGroups, get those (a missing CRD or permission just leaves their minimum
unknown); list Events (the extender's InvalidPod and VgpuQueued) and get the extender's Lease (without
permission, the report just says less). Kubernetes errors become `InspectError`s whose message says what to do.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from vgpu.adapters.kube.calls import (
    KubeApi,
    KubeConfigMissing,
    KubeError,
    KubeForbidden,
    KubeNotFound,
    KubeUnavailable,
)
from vgpu.adapters.kube.dra_calls import DraKubeApi
from vgpu.api.gang import POD_GROUP_LABEL
from vgpu.api.queues.in_force import QUEUED_EVENT
from vgpu.core.errors import VgpuError
from vgpu.inspect.lease import DEFAULT_LEASE
from vgpu.inspect.queue_events import is_held
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.waiting import INVALID_POD

LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
RBAC_HINT = (
    "ask an admin to bind the read-only ClusterRole vgpu-inspect, e.g. "
    "kubectl create clusterrolebinding vgpu-inspect-$USER --clusterrole=vgpu-inspect --user=$USER"
)


class InspectError(VgpuError):
    """The report cannot be made; the message is for the person at the terminal."""


def connect(kubeconfig: str | None, context: str | None = None) -> KubeApi:
    try:
        return DraKubeApi.from_environment(kubeconfig, context=context)
    except KubeConfigMissing as e:
        raise InspectError(f"no cluster to inspect: {e}") from e


def read_snapshot(
    api: KubeApi,
    *,
    now: datetime | None = None,
    selector: str | None = None,
    lease: str = DEFAULT_LEASE,
) -> Snapshot:
    """Nodes (those `selector` matches), live pods and the PodGroups they name, the extender's
    InvalidPod Events and its `lease` (`namespace/name`), as one consistent-enough snapshot."""
    taken = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        nodes = api.list_nodes(label_selector=selector).items
        pods = api.list_pods(field_selector=LIVE_PODS).items
    except KubeForbidden as e:
        raise InspectError(f"no permission to read nodes and pods ({e}); {RBAC_HINT}") from e
    except KubeUnavailable as e:
        raise InspectError(f"cannot reach the Kubernetes API server: {e}") from e
    except KubeError as e:
        raise InspectError(f"the Kubernetes API server refused the request: {e}") from e
    slices, claims = _dra_objects(api)
    lease_read, extender_lease = _lease(api, lease)
    return Snapshot(
        tuple(nodes),
        tuple(pods),
        _pod_groups(api, pods),
        taken,
        slices,
        claims,
        events=_invalid_pod_events(api, pods) + _queued_events(api, pods),
        extender_lease=extender_lease,
        lease_read=lease_read,
    )


def _invalid_pod_events(api: KubeApi, pods: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The extender's InvalidPod Events about pods bound to no node (the only ones the report
    explains); none where the reader may not list Events: the PodScheduled message remains."""
    wanted = any(not (p.get("spec") or {}).get("nodeName") for p in pods)
    return _events(api, INVALID_POD) if wanted else ()


def _queued_events(api: KubeApi, pods: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The queue leader's VgpuQueued Events, when some pod is held by a queue: its own words on
    why (`vgpu.inspect.queue_events`); none where the reader may not list Events."""
    return _events(api, QUEUED_EVENT) if any(is_held(p) for p in pods) else ()


def _events(api: KubeApi, reason: str) -> tuple[dict[str, Any], ...]:
    """Every Event with this reason (none where they may not be listed)."""
    try:
        listing = api.list_events(field_selector=f"reason={reason}")
    except (KubeNotFound, KubeForbidden):
        return ()
    except KubeError as e:
        raise InspectError(f"reading {reason} Events failed: {e}") from e
    return tuple(e for e in listing.items if e.get("reason") == reason)


def _lease(api: KubeApi, lease: str) -> tuple[bool, dict[str, Any] | None]:
    """(whether the Lease could be looked for, the Lease or None when there is none)."""
    namespace, _, name = lease.partition("/")
    try:
        return True, api.get_lease(namespace, name)
    except KubeNotFound:
        return True, None
    except KubeForbidden:
        return False, None  # unknown, not down: the report says nothing of the extender
    except KubeError as e:
        raise InspectError(f"reading the extender's Lease {lease} failed: {e}") from e


def _dra_objects(api: KubeApi) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    """ResourceSlices and ResourceClaims, for DRA-mode nodes; none where the cluster has no
    resource.k8s.io/v1 or the reader may not list them (the report then shows no DRA nodes)."""
    if not isinstance(api, DraKubeApi):
        return (), ()
    try:
        return tuple(api.list_resource_slices().items), tuple(api.list_resource_claims().items)
    except (KubeNotFound, KubeForbidden):
        return (), ()
    except KubeError as e:
        raise InspectError(f"reading ResourceSlices and ResourceClaims failed: {e}") from e


def _pod_groups(api: KubeApi, pods: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    names = sorted(
        {
            (str(p["metadata"].get("namespace") or "default"), labels[POD_GROUP_LABEL])
            for p in pods
            if POD_GROUP_LABEL in (labels := p["metadata"].get("labels") or {})
        }
    )
    groups = []
    for namespace, name in names:
        try:
            groups.append(api.get_pod_group(namespace, name))
        except (KubeNotFound, KubeForbidden):
            continue  # no CRD, no such group, or no permission: the minimum stays unknown
        except KubeError as e:
            raise InspectError(f"reading PodGroup {namespace}/{name} failed: {e}") from e
    return tuple(groups)
