"""Thin Kubernetes adapter over the official client, used by the agent, the extender and the CLI.

Everything goes in and out as plain dicts in wire (camelCase) form, which is what the pure core
consumes: calls use `_preload_content=False` and parse the JSON themselves, so no client model
round-trips. That also dodges two client 37.x traps: typed bodies re-serialise MicroTime without
the 6 fraction digits the server needs (so Leases go through the generic custom-objects path),
and `create_namespaced_pod_binding` fails to parse the Status a successful bind returns.

Every client error is translated into a `KubeError` subclass (itself a `VgpuError`).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

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
LEASES = ("coordination.k8s.io", "v1", "leases")
PODGROUPS = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


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
        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)

    @classmethod
    def from_environment(
        cls, kubeconfig: str | None = None, *, request_timeout: float = 10.0
    ) -> KubeApi:
        """Connect using `kubeconfig` if given, else in-cluster credentials when running in a
        pod, else `$KUBECONFIG` / `~/.kube/config`; raise `KubeConfigMissing` if none works."""
        configuration = load_configuration(kubeconfig)
        return cls(client.ApiClient(configuration), request_timeout=request_timeout)

    def close(self) -> None:
        self.api_client.close()

    # ----- plumbing ------------------------------------------------------------------------------
    def _raw(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("_request_timeout", self._timeout)
        try:
            return fn(*args, _preload_content=False, **kwargs)
        except ApiException as e:
            raise translate(what, e) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: {type(e).__name__}: {e}") from e

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        resp = self._raw(what, fn, *args, **kwargs)
        try:
            return cast(Obj, json.loads(resp.data))
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: reading the reply failed: {e}") from e
        finally:
            resp.release_conn()

    def _list_all(
        self, what: str, kind: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Listing:
        """Page through a list; items get `kind`/`apiVersion` like watch objects have."""
        items: list[Obj] = []
        token: str | None = None
        version = ""
        while True:
            page = self._call(what, fn, *args, limit=self._page_size, _continue=token, **kwargs)
            version = version or str(page["metadata"].get("resourceVersion", ""))
            items += [{"kind": kind, "apiVersion": "v1", **item} for item in page["items"]]
            token = page["metadata"].get("continue")
            if not token:
                return Listing(items, version)

    def _watch_stream(
        self,
        what: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        timeout: int,
        since: str,
        **kwargs: Any,
    ) -> Generator[Obj, None, None]:
        resp = self._raw(
            what,
            fn,
            *args,
            watch=True,
            resource_version=since,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _request_timeout=(self._timeout, timeout + 30),
            **kwargs,
        )
        buffer = b""
        try:
            for chunk in resp.stream(None, decode_content=False):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                yield from (cast(Obj, json.loads(line)) for line in lines if line.strip())
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: stream broke: {type(e).__name__}: {e}") from e
        finally:
            resp.release_conn()

    def _reflect(
        self,
        what: str,
        kind: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        selectors: Mapping[str, str | None],
        watch: _Watch,
    ) -> Iterator[WatchEvent]:
        sel = {k: v for k, v in selectors.items() if v}
        return Reflector(
            lambda: self._list_all(what, kind, fn, *args, **sel),
            lambda since: self._watch_stream(what, fn, args, watch.timeout, since, **sel),
            expired=KubeExpired,
            transient=KubeUnavailable,
            start_version=watch.since,
            stop=watch.stop,
            retry_delay=watch.retry_delay,
        ).events()

    # ----- nodes and pods ----------------------------------------------------------------------
    def get_node(self, name: str) -> Obj:
        return self._call(f"get node {name}", self._core.read_node, name)

    def list_nodes(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> Listing:
        return self._list_all(
            "list nodes", "Node", self._core.list_node, **_selectors(label_selector, field_selector)
        )

    def get_pod(self, namespace: str, name: str) -> Obj:
        return self._call(
            f"get pod {namespace}/{name}", self._core.read_namespaced_pod, name, namespace
        )

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Listing:
        fn, args = self._pods_fn(namespace)
        return self._list_all(
            "list pods", "Pod", fn, *args, **_selectors(label_selector, field_selector)
        )

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
        return self._reflect(
            "watch nodes",
            "Node",
            self._core.list_node,
            (),
            _selectors(label_selector, field_selector),
            watch,
        )

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
        fn, args = self._pods_fn(namespace)
        watch = _Watch(resource_version, stop, timeout_seconds, retry_delay)
        return self._reflect(
            "watch pods", "Pod", fn, args, _selectors(label_selector, field_selector), watch
        )

    def _pods_fn(self, namespace: str | None) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        if namespace is None:
            return self._core.list_pod_for_all_namespaces, ()
        return self._core.list_namespaced_pod, (namespace,)

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
            self._core.patch_node,
            name,
            {"metadata": meta},
            _content_type=_MERGE_PATCH,
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
            self._core.patch_namespaced_pod,
            name,
            namespace,
            {"metadata": meta},
            _content_type=_MERGE_PATCH,
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
        resp = self._raw(what, self._core.create_namespaced_pod_binding, name, namespace, body)
        try:
            _ = resp.data  # drain the reply, or the pooled connection's next request fails
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: reading the reply failed: {e}") from e
        finally:
            resp.release_conn()

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
            self._core.create_namespaced_event,
            namespace,
            body,
        )

    def get_lease(self, namespace: str, name: str) -> Obj:
        return self._call(
            f"get lease {namespace}/{name}",
            self._custom.get_namespaced_custom_object,
            *LEASES[:2],
            namespace,
            LEASES[2],
            name,
        )

    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> Obj:
        """Create a Lease; format its times with `microtime()`. Exists already → KubeConflict."""
        return self._call(
            f"create lease in {namespace}",
            self._custom.create_namespaced_custom_object,
            *LEASES[:2],
            namespace,
            LEASES[2],
            dict(lease),
        )

    def replace_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> Obj:
        """PUT a Lease carrying the resourceVersion read; someone else wrote → KubeConflict."""
        return self._call(
            f"replace lease {namespace}/{name}",
            self._custom.replace_namespaced_custom_object,
            *LEASES[:2],
            namespace,
            LEASES[2],
            name,
            dict(lease),
        )

    def get_pod_group(self, namespace: str, name: str) -> Obj:
        """A scheduler-plugins `scheduling.x-k8s.io/v1alpha1` PodGroup."""
        return self._call(
            f"get podgroup {namespace}/{name}",
            self._custom.get_namespaced_custom_object,
            *PODGROUPS[:2],
            namespace,
            PODGROUPS[2],
            name,
        )


_MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True, slots=True)
class _Watch:
    since: str | None
    stop: threading.Event | None
    timeout: int
    retry_delay: float


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str | None]:
    return {"label_selector": label_selector, "field_selector": field_selector}
