"""Thin Kubernetes adapter over the official client, used by the agent, the extender and the CLI.

Everything goes in and out as plain dicts in wire (camelCase) form, which is what the pure core
consumes: requests go through the client's request layer (`vgpu.adapters.kube.request`: the
official `ApiClient`, unread replies) and the JSON is parsed by `vgpu.adapters.kube.plumbing`, so no
client model round-trips and the generated API classes (~21 MiB of imports) are never loaded. That
also dodges two client 37.x traps: typed bodies re-serialise MicroTime without the 6 fraction
digits the server needs, and `create_namespaced_pod_binding` fails to parse the Status a
successful bind returns. This module is the list of calls vgpu makes; their paths and bodies are
`vgpu.adapters.kube.bodies`'.

Every client error is translated into a `KubeError` subclass (itself a `VgpuError`).
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes.client.api_client import ApiClient
from kubernetes.client.exceptions import ApiException

from vgpu.adapters.kube import bodies
from vgpu.adapters.kube.bodies import (
    ALL_EVENTS,
    CONFIGMAP,
    CUSTOM,
    CUSTOM_OBJECT,
    EVENTS,
    JSON_PATCH,
    LEASES,
    MERGE_PATCH,
    NAMESPACES,
    NODE,
    NODES,
    POD,
    PODGROUPS,
    microtime,
    pods_path,
)
from vgpu.adapters.kube.credentials import load_configuration
from vgpu.adapters.kube.errors import (
    KubeConfigMissing,
    KubeConflict,
    KubeError,
    KubeExpired,
    KubeForbidden,
    KubeInvalid,
    KubeNotFound,
    KubeUnavailable,
    translate,
)
from vgpu.adapters.kube.fast_post import LeanPoster
from vgpu.adapters.kube.plumbing import KubeWire, WatchOptions, selectors
from vgpu.adapters.kube.reflector import Listing, WatchEvent

__all__ = [
    "KubeApi",
    "KubeConfigMissing",
    "KubeConflict",
    "KubeError",
    "KubeExpired",
    "KubeForbidden",
    "KubeInvalid",
    "KubeNotFound",
    "KubeUnavailable",
    "Listing",
    "WatchEvent",
    "microtime",
]

Obj = dict[str, Any]


class KubeApi:
    """The handful of API calls vgpu makes, returning plain dicts and raising `KubeError`s."""

    def __init__(self, api_client: Any, *, request_timeout: float = 10.0, page_size: int = 500):
        self.api_client = api_client
        self._timeout = request_timeout
        self._wire = KubeWire(api_client, timeout=request_timeout, page_size=page_size)
        self._poster = LeanPoster.for_client(api_client)
        """The Binding's lean path (`vgpu.adapters.kube.fast_post`); None: through `Requester`."""

    @classmethod
    def from_environment(
        cls,
        kubeconfig: str | None = None,
        *,
        request_timeout: float = 10.0,
        context: str | None = None,
    ) -> KubeApi:
        """Connect using `kubeconfig` if given, else in-cluster credentials when running in a
        pod, else `$KUBECONFIG` / `~/.kube/config` (its `context`, else its current one); raise
        `KubeConfigMissing` if none works."""
        configuration = load_configuration(kubeconfig, context)
        return cls(ApiClient(configuration), request_timeout=request_timeout)

    def close(self) -> None:
        if self._poster is not None:
            self._poster.close()
        self.api_client.close()

    # ----- nodes and pods ----------------------------------------------------------------------
    def get_node(self, name: str) -> Obj:
        return self._wire.call(f"get node {name}", "GET", NODE, {"name": name})

    def list_nodes(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> Listing:
        query = selectors(label_selector, field_selector)
        return self._wire.list_all("list nodes", "Node", NODES, {}, query)

    def list_namespaces(self) -> Listing:
        """Every namespace (the queues bound to namespaces by label read their labels)."""
        return self._wire.list_all("list namespaces", "Namespace", NAMESPACES, {}, {})

    def get_pod(self, namespace: str, name: str) -> Obj:
        params = {"namespace": namespace, "name": name}
        return self._wire.call(f"get pod {namespace}/{name}", "GET", POD, params)

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Listing:
        path, params = pods_path(namespace)
        query = selectors(label_selector, field_selector)
        return self._wire.list_all("list pods", "Pod", path, params, query)

    def watch_nodes(
        self,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        stop: threading.Event | None = None,
        timeout_seconds: int = 300,
        retry_delay: float = 1.0,
    ) -> Iterator[WatchEvent]:
        """Endless (type, node) stream; see `vgpu.adapters.kube.reflector` for the semantics."""
        watch = WatchOptions(resource_version, stop, timeout_seconds, retry_delay)
        query = selectors(label_selector, field_selector)
        return self._wire.reflect("watch nodes", "Node", NODES, {}, query, watch)

    def watch_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        stop: threading.Event | None = None,
        timeout_seconds: int = 300,
        retry_delay: float = 1.0,
    ) -> Iterator[WatchEvent]:
        """Endless (type, pod) stream; see `vgpu.adapters.kube.reflector` for the semantics."""
        path, params = pods_path(namespace)
        watch = WatchOptions(resource_version, stop, timeout_seconds, retry_delay)
        query = selectors(label_selector, field_selector)
        return self._wire.reflect("watch pods", "Pod", path, params, query, watch)

    def patch_node_metadata(
        self,
        name: str,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
    ) -> Obj:
        """JSON-merge-patch a node's labels/annotations; a None value deletes the key."""
        meta: Obj = {}
        if labels:
            meta["labels"] = dict(labels)
        if annotations:
            meta["annotations"] = dict(annotations)
        return self._wire.call(
            f"patch node {name}",
            "PATCH",
            NODE,
            {"name": name},
            body={"metadata": meta},
            content_type=MERGE_PATCH,
        )

    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        *,
        resource_version: str | None = None,
    ) -> Obj:
        """Merge-patch pod annotations; with `resource_version`, a changed pod → KubeConflict."""
        meta: Obj = {"annotations": dict(annotations)}
        if resource_version:
            meta["resourceVersion"] = resource_version
        return self._wire.call(
            f"patch pod {namespace}/{name}",
            "PATCH",
            POD,
            {"namespace": namespace, "name": name},
            body={"metadata": meta},
            content_type=MERGE_PATCH,
        )

    def bind_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        *,
        annotations: Mapping[str, str] | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        """POST a Binding; its annotations land on the pod in the same atomic write.
        `uid`/`resource_version` are preconditions. A pod already bound → KubeConflict."""
        body = bodies.binding(namespace, name, node, annotations, uid, resource_version)
        what = f"bind pod {namespace}/{name} to {node}"
        params = {"namespace": namespace, "name": name}
        if self._poster is None:
            resp = self._wire.raw(what, "POST", POD + "/binding", params, body=body)
            try:
                _ = resp.data  # drain the reply, or the pooled connection's next request fails
            except (urllib3.exceptions.HTTPError, OSError) as e:
                raise KubeUnavailable(f"{what}: reading the reply failed: {e}") from e
            finally:
                resp.release_conn()
            return
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding"
        try:
            self._poster.post(path, json.dumps(body).encode(), self._timeout)
        except ApiException as e:
            raise translate(what, e) from e
        except (http.client.HTTPException, OSError) as e:
            raise KubeUnavailable(f"{what}: {type(e).__name__}: {e}") from e

    def remove_scheduling_gate(
        self, namespace: str, name: str, gates: list[str], gate: str, *, uid: str = ""
    ) -> Obj:
        """Remove `gate` from a pod whose gates are `gates` (as last read), in one JSON patch
        that first tests the gate list (and the UID when given): if anyone changed them since,
        the patch fails whole (KubeInvalid), so a gate is never removed from a pod not seen."""
        return self._wire.call(
            f"remove scheduling gate {gate} from pod {namespace}/{name}",
            "PATCH",
            POD,
            {"namespace": namespace, "name": name},
            body=bodies.gate_removal(gates, gate, uid),
            content_type=JSON_PATCH,
        )

    def evict_pod(self, namespace: str, name: str, *, uid: str = "", dry_run: bool = False) -> None:
        """Evict a pod through the Eviction API, so PodDisruptionBudgets hold: a budget that
        allows no disruption now is `KubeError` 429 (TooManyRequests), nothing is deleted.
        `dry_run` asks the same question (budgets checked) and changes nothing."""
        self._wire.call(
            f"evict pod {namespace}/{name}" + (" (dry run)" if dry_run else ""),
            "POST",
            POD + "/eviction",
            {"namespace": namespace, "name": name},
            body=bodies.eviction(namespace, name, uid, dry_run),
        )

    def get_config_map(self, namespace: str, name: str) -> Obj:
        """A ConfigMap (NotFound → KubeNotFound)."""
        params = {"namespace": namespace, "name": name}
        return self._wire.call(f"get configmap {namespace}/{name}", "GET", CONFIGMAP, params)

    # ----- events, leases, pod groups ------------------------------------------------------------
    def create_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        event_type: str = "Normal",
        component: str = "vgpu",
        now: datetime | None = None,
    ) -> Obj:
        """Record a core/v1 Event about `involved` (a pod or node dict, as returned here).
        Cluster-scoped objects' events go to the `default` namespace, as kubectl expects."""
        body = bodies.event(
            involved,
            reason=reason,
            message=message,
            event_type=event_type,
            component=component,
            now=now or datetime.now(UTC),
        )
        return self._wire.call(
            f"create event {reason} for {body['involvedObject'].get('name', '')}",
            "POST",
            EVENTS,
            {"namespace": body["metadata"]["namespace"]},
            body=body,
        )

    def list_events(self, *, field_selector: str | None = None) -> Listing:
        """core/v1 Events in every namespace (e.g. `reason=InvalidPod`)."""
        query = selectors(None, field_selector)
        return self._wire.list_all("list events", "Event", ALL_EVENTS, {}, query)

    def get_lease(self, namespace: str, name: str) -> Obj:
        params = {**LEASES, "namespace": namespace, "name": name}
        return self._wire.call(f"get lease {namespace}/{name}", "GET", CUSTOM_OBJECT, params)

    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> Obj:
        """Create a Lease; format its times with `microtime()`. Exists already → KubeConflict."""
        params = {**LEASES, "namespace": namespace}
        return self._wire.call(
            f"create lease in {namespace}", "POST", CUSTOM, params, body=dict(lease)
        )

    def replace_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> Obj:
        """PUT a Lease carrying the resourceVersion read; someone else wrote → KubeConflict."""
        params = {**LEASES, "namespace": namespace, "name": name}
        return self._wire.call(
            f"replace lease {namespace}/{name}", "PUT", CUSTOM_OBJECT, params, body=dict(lease)
        )

    def get_pod_group(self, namespace: str, name: str) -> Obj:
        """A scheduler-plugins `scheduling.x-k8s.io/v1alpha1` PodGroup."""
        params = {**PODGROUPS, "namespace": namespace, "name": name}
        return self._wire.call(f"get podgroup {namespace}/{name}", "GET", CUSTOM_OBJECT, params)
