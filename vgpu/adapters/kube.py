"""Thin Kubernetes adapter over the official client, used by the agent, the extender and the CLI.

Everything goes in and out as plain dicts in wire (camelCase) form, which is what the pure core
consumes: requests go through the client's request layer (`vgpu.adapters.kuberequest`: the
official `ApiClient`, unread replies) and the JSON is parsed here, so no client model round-trips
and the generated API classes (~21 MiB of imports) are never loaded. That also dodges two client
37.x traps: typed bodies re-serialise MicroTime without the 6 fraction digits the server needs,
and `create_namespaced_pod_binding` fails to parse the Status a successful bind returns.

Every client error is translated into a `KubeError` subclass (itself a `VgpuError`).
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import uuid
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import quote

import urllib3
from kubernetes.client.api_client import ApiClient
from kubernetes.client.exceptions import ApiException

from vgpu.adapters import fastjson
from vgpu.adapters.kubeconfig import load_configuration
from vgpu.adapters.kubeerrors import (
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
from vgpu.adapters.kubepost import LeanPoster
from vgpu.adapters.kuberequest import Requester
from vgpu.adapters.kubewatch import Listing, Reflector, WatchEvent

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

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Params = Mapping[str, str]  # path template fields
Query = Mapping[str, object]  # wire-named query parameters; None values are left out
LEASES = {"group": "coordination.k8s.io", "version": "v1", "plural": "leases"}
PODGROUPS = {"group": "scheduling.x-k8s.io", "version": "v1alpha1", "plural": "podgroups"}
# Path templates; `{...}` are filled (quoted) by the client from the request's params.
NODES = "/api/v1/nodes"
NODE = NODES + "/{name}"
ALL_PODS = "/api/v1/pods"
PODS = "/api/v1/namespaces/{namespace}/pods"
POD = PODS + "/{name}"
EVENTS = "/api/v1/namespaces/{namespace}/events"
ALL_EVENTS = "/api/v1/events"
CONFIGMAP = "/api/v1/namespaces/{namespace}/configmaps/{name}"
CUSTOM = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"
CUSTOM_OBJECT = CUSTOM + "/{name}"


def microtime(moment: datetime) -> str:
    """Format a MicroTime the API server accepts: always exactly six fraction digits."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeApi:
    """The handful of API calls vgpu makes, returning plain dicts and raising `KubeError`s."""

    def __init__(self, api_client: Any, *, request_timeout: float = 10.0, page_size: int = 500):
        self.api_client = api_client
        self._timeout = request_timeout
        self._page_size = page_size
        self._requests = Requester(api_client)
        self._poster = LeanPoster.for_client(api_client)
        """The Binding's lean path (`vgpu.adapters.kubepost`); None: through `Requester`."""

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

    # ----- plumbing ------------------------------------------------------------------------------
    def _raw(self, what: str, method: str, path: str, params: Params, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", self._timeout)
        try:
            return self._requests.send(method, path, params=params, **kwargs)
        except ApiException as e:
            raise translate(what, e) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: {type(e).__name__}: {e}") from e

    def _call(self, what: str, method: str, path: str, params: Params, **kwargs: Any) -> Obj:
        resp = self._raw(what, method, path, params, **kwargs)
        try:
            return cast(Obj, fastjson.loads(resp.data))
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: reading the reply failed: {e}") from e
        finally:
            resp.release_conn()

    def _list_all(self, what: str, kind: str, path: str, params: Params, query: Query) -> Listing:
        """Page through a list; items get `kind`/`apiVersion` like watch objects have."""
        items: list[Obj] = []
        token: str | None = None
        version = ""
        while True:
            page_query = {**query, "limit": self._page_size, "continue": token}
            page = self._call(what, "GET", path, params, query=page_query)
            version = version or str(page["metadata"].get("resourceVersion", ""))
            items += [{"kind": kind, "apiVersion": "v1", **item} for item in page["items"]]
            token = page["metadata"].get("continue")
            if not token:
                return Listing(items, version)

    def _watch_stream(
        self,
        what: str,
        path: str,
        params: Params,
        query: Query,
        timeout: int,
        since: str,
    ) -> Generator[bytes, None, None]:
        watch_query = {
            **query,
            "watch": True,
            "resourceVersion": since,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
        }
        resp = self._raw(
            what, "GET", path, params, query=watch_query, timeout=(self._timeout, timeout + 30)
        )
        buffer = b""
        try:
            for chunk in resp.stream(None, decode_content=False):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                yield from (line for line in lines if line.strip())
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: stream broke: {type(e).__name__}: {e}") from e
        finally:
            resp.release_conn()

    def _reflect(
        self,
        what: str,
        kind: str,
        path: str,
        params: Params,
        selectors: Query,
        watch: _Watch,
    ) -> Iterator[WatchEvent]:
        sel = {k: v for k, v in selectors.items() if v}
        return Reflector(
            lambda: self._list_all(what, kind, path, params, sel),
            lambda since: self._watch_stream(what, path, params, sel, watch.timeout, since),
            expired=KubeExpired,
            transient=KubeUnavailable,
            start_version=watch.since,
            stop=watch.stop,
            retry_delay=watch.retry_delay,
        ).events()

    # ----- nodes and pods ----------------------------------------------------------------------
    def get_node(self, name: str) -> Obj:
        return self._call(f"get node {name}", "GET", NODE, {"name": name})

    def list_nodes(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> Listing:
        selectors = _selectors(label_selector, field_selector)
        return self._list_all("list nodes", "Node", NODES, {}, selectors)

    def get_pod(self, namespace: str, name: str) -> Obj:
        params = {"namespace": namespace, "name": name}
        return self._call(f"get pod {namespace}/{name}", "GET", POD, params)

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Listing:
        path, params = _pods(namespace)
        selectors = _selectors(label_selector, field_selector)
        return self._list_all("list pods", "Pod", path, params, selectors)

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
        """Endless (type, node) stream; see `vgpu.adapters.kubewatch` for the semantics."""
        watch = _Watch(resource_version, stop, timeout_seconds, retry_delay)
        selectors = _selectors(label_selector, field_selector)
        return self._reflect("watch nodes", "Node", NODES, {}, selectors, watch)

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
        """Endless (type, pod) stream; see `vgpu.adapters.kubewatch` for the semantics."""
        path, params = _pods(namespace)
        watch = _Watch(resource_version, stop, timeout_seconds, retry_delay)
        selectors = _selectors(label_selector, field_selector)
        return self._reflect("watch pods", "Pod", path, params, selectors, watch)

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
        return self._call(
            f"patch node {name}",
            "PATCH",
            NODE,
            {"name": name},
            body={"metadata": meta},
            content_type=_MERGE_PATCH,
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
        return self._call(
            f"patch pod {namespace}/{name}",
            "PATCH",
            POD,
            {"namespace": namespace, "name": name},
            body={"metadata": meta},
            content_type=_MERGE_PATCH,
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
        meta: Obj = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        if uid:
            meta["uid"] = uid
        if resource_version:
            meta["resourceVersion"] = resource_version
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        what = f"bind pod {namespace}/{name} to {node}"
        params = {"namespace": namespace, "name": name}
        if self._poster is None:
            resp = self._raw(what, "POST", POD + "/binding", params, body=body)
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
        kept = [{"name": g} for g in gates if g != gate]
        ops: list[Obj] = [
            {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": g} for g in gates]}
        ]
        if uid:
            ops.insert(0, {"op": "test", "path": "/metadata/uid", "value": uid})
        ops.append(
            {"op": "replace", "path": "/spec/schedulingGates", "value": kept}
            if kept
            else {"op": "remove", "path": "/spec/schedulingGates"}
        )
        return self._call(
            f"remove scheduling gate {gate} from pod {namespace}/{name}",
            "PATCH",
            POD,
            {"namespace": namespace, "name": name},
            body=ops,
            content_type=_JSON_PATCH,
        )

    def evict_pod(self, namespace: str, name: str, *, uid: str = "", dry_run: bool = False) -> None:
        """Evict a pod through the Eviction API, so PodDisruptionBudgets hold: a budget that
        allows no disruption now is `KubeError` 429 (TooManyRequests), nothing is deleted.
        `dry_run` asks the same question (budgets checked) and changes nothing."""
        meta: Obj = {"name": name, "namespace": namespace}
        body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": meta}
        options: Obj = {}
        if uid:
            options["preconditions"] = {"uid": uid}
        if dry_run:
            options["dryRun"] = ["All"]
        if options:
            body["deleteOptions"] = options
        self._call(
            f"evict pod {namespace}/{name}" + (" (dry run)" if dry_run else ""),
            "POST",
            POD + "/eviction",
            {"namespace": namespace, "name": name},
            body=body,
        )

    def get_config_map(self, namespace: str, name: str) -> Obj:
        """A ConfigMap (NotFound → KubeNotFound)."""
        params = {"namespace": namespace, "name": name}
        return self._call(f"get configmap {namespace}/{name}", "GET", CONFIGMAP, params)

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
        meta = involved.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        stamp = _rfc3339(now or datetime.now(UTC))
        ref = {
            "kind": involved.get("kind", ""),
            "apiVersion": involved.get("apiVersion", "v1"),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
        }
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {k: v for k, v in ref.items() if v},
            "reason": reason,
            "message": message,
            "type": event_type,
            "count": 1,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
        }
        return self._call(
            f"create event {reason} for {ref['name']}",
            "POST",
            EVENTS,
            {"namespace": namespace},
            body=body,
        )

    def list_events(self, *, field_selector: str | None = None) -> Listing:
        """core/v1 Events in every namespace (e.g. `reason=InvalidPod`)."""
        selectors = _selectors(None, field_selector)
        return self._list_all("list events", "Event", ALL_EVENTS, {}, selectors)

    def get_lease(self, namespace: str, name: str) -> Obj:
        params = {**LEASES, "namespace": namespace, "name": name}
        return self._call(f"get lease {namespace}/{name}", "GET", CUSTOM_OBJECT, params)

    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> Obj:
        """Create a Lease; format its times with `microtime()`. Exists already → KubeConflict."""
        params = {**LEASES, "namespace": namespace}
        return self._call(f"create lease in {namespace}", "POST", CUSTOM, params, body=dict(lease))

    def replace_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> Obj:
        """PUT a Lease carrying the resourceVersion read; someone else wrote → KubeConflict."""
        params = {**LEASES, "namespace": namespace, "name": name}
        return self._call(
            f"replace lease {namespace}/{name}", "PUT", CUSTOM_OBJECT, params, body=dict(lease)
        )

    def get_pod_group(self, namespace: str, name: str) -> Obj:
        """A scheduler-plugins `scheduling.x-k8s.io/v1alpha1` PodGroup."""
        params = {**PODGROUPS, "namespace": namespace, "name": name}
        return self._call(f"get podgroup {namespace}/{name}", "GET", CUSTOM_OBJECT, params)


_MERGE_PATCH = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True, slots=True)
class _Watch:
    since: str | None
    stop: threading.Event | None
    timeout: int
    retry_delay: float


def _selectors(label_selector: str | None, field_selector: str | None) -> Query:
    return {"labelSelector": label_selector, "fieldSelector": field_selector}


def _pods(namespace: str | None) -> tuple[str, Params]:
    """The pod collection: all namespaces, or one."""
    return (ALL_PODS, {}) if namespace is None else (PODS, {"namespace": namespace})
