"""REST semantics of the fake API server: URL routing and the verbs, minus the HTTP plumbing.

`Api.handle` turns (method, path, query, content type, body) into a `Reply` (status + JSON body)
or a `WatchRequest` that the HTTP layer streams. Errors are `ApiError`s that become `Status`
bodies. The pods/binding subresource follows the real registry: it sets `spec.nodeName`, merges
the Binding's annotations into the pod and adds `PodScheduled=True` in one atomic write, refuses
an already-bound pod with 409, and answers with a Success `Status`, not a Binding.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.eviction import evict
from tests.kubeapi.patch import json_patch, merge_patch, strategic_merge_patch
from tests.kubeapi.resources import PODS, ApiError, Resource, conflict, success_status
from tests.kubeapi.selectors import Predicate, field_selector, label_selector
from tests.kubeapi.store import Obj, Store, clone


@dataclass(frozen=True, slots=True)
class Route:
    res: Resource
    namespace: str | None
    name: str | None
    subresource: str | None


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: Obj


@dataclass(frozen=True, slots=True)
class WatchRequest:
    res: Resource
    namespace: str | None
    match: Predicate
    resource_version: str
    timeout: float | None
    bookmarks: bool


_NOT_FOUND = "the server could not find the requested resource"


def route(store: Store, path: str) -> Route:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise ApiError(404, _NOT_FOUND)
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 3:
        raise ApiError(404, _NOT_FOUND)
    if (group, rest[0]) == ("", "bindings") and namespace and len(rest) == 1:
        return Route(PODS, namespace, None, "bindings")
    res = store.resource(group, version, rest[0])
    if res is None or (not res.namespaced and namespace is not None):
        raise ApiError(404, _NOT_FOUND)
    if res.namespaced and namespace is None and len(rest) > 1:
        raise ApiError(404, _NOT_FOUND)
    name, sub = [*rest[1:], None, None][:2]
    return Route(res, namespace, name, sub)


def _apply_patch(res: Resource, content_type: str, current: Obj, patch: Any) -> Obj:
    kind = content_type.split(";")[0].strip()
    if kind == "application/json-patch+json":
        return json_patch(current, patch)  # type: ignore[no-any-return]
    if not isinstance(patch, dict):
        raise ApiError(400, "merge patch body must be a JSON object")
    if kind == "application/merge-patch+json":
        return merge_patch(current, patch)  # type: ignore[no-any-return]
    if kind == "application/strategic-merge-patch+json" and res.builtin:
        return strategic_merge_patch(current, patch)  # type: ignore[no-any-return]
    raise ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media "
        f"types include: application/json-patch+json, application/merge-patch+json"
        f"{', application/strategic-merge-patch+json' if res.builtin else ''}",
    )


def _list_body(res: Resource, items: list[Obj], rv: int, cont: str | None, left: int) -> Obj:
    if res.builtin:  # the real server omits kind/apiVersion on built-in list items
        for item in items:
            item.pop("kind", None)
            item.pop("apiVersion", None)
    meta: Obj = {"resourceVersion": str(rv)}
    if cont:
        meta.update({"continue": cont, "remainingItemCount": left})
    return {"kind": res.list_kind, "apiVersion": res.api_version, "metadata": meta, "items": items}


class Api:
    """The verbs, over a `Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def handle(
        self, method: str, path: str, query: dict[str, str], content_type: str, body: Any
    ) -> Reply | WatchRequest:
        r = route(self.store, path)
        if r.subresource == "bindings" and method == "POST":
            return self._bind(r.namespace or "", (body or {}).get("metadata", {}).get("name"), body)
        if r.subresource == "eviction" and method == "POST" and r.res is PODS and r.name:
            return Reply(201, evict(self.store, r.namespace or "", r.name, body))
        if r.subresource not in (None, "status", "binding"):
            raise ApiError(404, _NOT_FOUND)
        ns = r.namespace or ""
        if method == "GET" and r.name is None:
            return self._list_or_watch(r, query)
        if method == "GET" and r.name is not None:
            return Reply(200, self.store.read(r.res, ns, r.name))
        if method == "POST" and r.name is None and (r.namespace or not r.res.namespaced):
            return Reply(201, self.store.create(r.res, ns, self._object(body)))
        if method == "POST" and r.subresource == "binding" and r.res is PODS:
            return self._bind(ns, r.name, body)
        if method == "PUT" and r.name is not None and r.subresource != "binding":
            return Reply(200, self._replace(r, ns, r.name, self._object(body)))
        if method == "PATCH" and r.name is not None and r.subresource != "binding":
            return Reply(
                200,
                self.store.update(
                    r.res,
                    ns,
                    r.name,
                    lambda cur: _apply_patch(r.res, content_type, cur, body),
                    subresource=r.subresource,
                ),
            )
        if method == "DELETE" and r.name is not None and r.subresource is None:
            return self._delete(r.res, ns, r.name, body)
        raise ApiError(405, f"{method} is not supported on {path} by the fake API server")

    @staticmethod
    def _object(body: Any) -> Obj:
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        return body

    def _replace(self, r: Route, ns: str, name: str, body: Obj) -> Obj:
        meta = body.get("metadata") or {}
        if meta.get("name", name) != name:
            raise ApiError(400, "the name of the object does not match the name on the URL")
        if not r.res.builtin and not meta.get("resourceVersion"):
            raise ApiError(
                422,
                f"{r.res.kind} is invalid: metadata.resourceVersion: Invalid "
                "value: 0x0: must be specified for an update",
            )
        return self.store.update(
            r.res, ns, name, lambda _cur: clone(body), subresource=r.subresource
        )

    def _delete(self, res: Resource, ns: str, name: str, body: Any) -> Reply:
        preconditions = (body or {}).get("preconditions") if isinstance(body, dict) else None
        gone = self.store.delete(res, ns, name, preconditions)
        if res.returns_deleted_object:
            return Reply(200, gone)
        details = {
            "name": name,
            "group": res.group,
            "kind": res.plural,
            "uid": gone["metadata"]["uid"],
        }
        return Reply(200, success_status(200, details))

    def _list_or_watch(self, r: Route, query: dict[str, str]) -> Reply | WatchRequest:
        labels = label_selector(query.get("labelSelector"))
        fields = field_selector(query.get("fieldSelector"), r.res)

        def match(obj: Mapping[str, Any]) -> bool:
            return labels(obj) and fields(obj)

        if query.get("watch") in ("true", "1"):
            timeout = query.get("timeoutSeconds")
            return WatchRequest(
                r.res,
                r.namespace,
                match,
                query.get("resourceVersion", ""),
                float(timeout) if timeout else None,
                query.get("allowWatchBookmarks") == "true",
            )
        items, rv = self.store.snapshot(r.res, r.namespace)
        items = [o for o in items if match(o)]
        return Reply(200, self._page(r.res, items, rv, query))

    @staticmethod
    def _page(res: Resource, items: list[Obj], rv: int, query: dict[str, str]) -> Obj:
        """Serve `limit`/`continue` pages (from the current state, not the first page's)."""
        if "continue" in query:
            after = json.loads(base64.urlsafe_b64decode(query["continue"]))
            items = [
                o
                for o in items
                if [o["metadata"].get("namespace", ""), o["metadata"]["name"]] > after
            ]
        limit = int(query.get("limit") or 0)
        if not limit or len(items) <= limit:
            return _list_body(res, items, rv, None, 0)
        last = items[limit - 1]["metadata"]
        token = base64.urlsafe_b64encode(
            json.dumps([last.get("namespace", ""), last["name"]]).encode()
        ).decode()
        return _list_body(res, items[:limit], rv, token, len(items) - limit)

    def _bind(self, ns: str, name: str | None, binding: Any) -> Reply:
        binding = self._object(binding)
        meta = binding.get("metadata") or {}
        if not name or meta.get("name", name) != name:
            raise ApiError(400, "the name of the binding does not match the pod on the URL")
        node = (binding.get("target") or {}).get("name")
        if not node:
            raise ApiError(422, "Binding is invalid: target.name: Required value")

        def assign(pod: Obj) -> Obj:
            pmeta, spec = pod["metadata"], pod.setdefault("spec", {})
            for field in ("uid", "resourceVersion"):
                if meta.get(field) and meta[field] != pmeta.get(field):
                    raise conflict(PODS, name, f"Precondition failed: {field} mismatch")
            if spec.get("nodeName"):
                raise ApiError(
                    409,
                    f'Operation cannot be fulfilled on pods/binding "{name}": '
                    f'pod {name} is already assigned to node "{spec["nodeName"]}"',
                    "Conflict",
                    {"name": name, "kind": "pods"},
                )
            if pmeta.get("deletionTimestamp"):
                raise conflict(PODS, name, "pod is being deleted")
            spec["nodeName"] = node
            pmeta["annotations"] = {
                **(pmeta.get("annotations") or {}),
                **(meta.get("annotations") or {}),
            }
            status = pod.setdefault("status", {})
            conditions = [
                c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"
            ]
            status["conditions"] = [*conditions, {"type": "PodScheduled", "status": "True"}]
            pmeta.pop("resourceVersion", None)
            return pod

        self.store.update(PODS, ns, name, assign, subresource="binding")
        return Reply(201, success_status(201))
