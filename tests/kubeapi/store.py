"""In-memory object store behind the fake API server: one cluster-wide resourceVersion.

Every write bumps a single integer resourceVersion and appends a `Change` to a bounded history.
Watches read that history, so a watch from an old-but-retained version sees every change in
order, and one from before the retained window gets 410 Expired, as against a real etcd.
A write that changes nothing keeps the old resourceVersion and emits no event (like the real
server). Tests reach in through `put`, `get`, `objects`, `remove`, `compact` and `end_watches`.
"""

from __future__ import annotations

import copy
import re
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, overload

from tests.kubeapi.resources import (
    DEFAULT_RESOURCES,
    STALE,
    ApiError,
    Resource,
    already_exists,
    conflict,
    not_found,
)

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped kinds

_MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
_VOLATILE_META = ("resourceVersion", "generation", "managedFields")


@dataclass(frozen=True, slots=True)
class Change:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: Resource
    obj: Obj
    old: Obj | None


class WatchClosed(Exception):
    """The server is stopping or a test asked every open watch to end."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(res: Resource, obj: Obj) -> Key:
    meta = obj.get("metadata", {})
    return (meta.get("namespace", "") if res.namespaced else "", meta.get("name", ""))


def _validate(res: Resource, obj: Obj) -> None:
    meta = obj.get("metadata", {})
    for field in ("labels", "annotations"):
        values = meta.get(field) or {}
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise ApiError(
                400,
                f"{res.kind} in version {res.version!r} cannot be handled: "
                f"metadata.{field} values must be strings",
            )
    if res.kind == "Lease":
        for field in ("acquireTime", "renewTime"):
            value = (obj.get("spec") or {}).get(field)
            if value is not None and not _MICROTIME.match(str(value)):
                raise ApiError(
                    400,
                    f'Lease in version "v1" cannot be handled as a Lease: '
                    f'parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00"'
                    f": spec.{field} needs exactly six fraction digits",
                )


@overload
def clone(obj: Obj) -> Obj: ...
@overload
def clone(obj: Any) -> Any: ...
def clone(obj: Any) -> Any:
    """A deep copy of JSON-shaped data. Every read and write of the store copies objects, and
    `copy.deepcopy`'s generality (memo, reductions) made it most of the fake's CPU time."""
    kind = type(obj)
    if kind is dict:
        return {k: clone(v) for k, v in obj.items()}
    if kind is list:
        return [clone(v) for v in obj]
    if kind in (str, int, float, bool) or obj is None:
        return obj
    return copy.deepcopy(obj)


def _same_but_volatile(a: Obj, b: Obj) -> bool:
    """Whether two versions differ only in server-managed metadata (then a write is a no-op)."""
    if a.keys() != b.keys() or any(a[k] != b[k] for k in a if k != "metadata"):
        return False
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    keep_a = {k: v for k, v in ma.items() if k not in _VOLATILE_META}
    return keep_a == {k: v for k, v in mb.items() if k not in _VOLATILE_META}


class Store:
    """Thread-safe object store with a change history for watches."""

    def __init__(
        self,
        resources: Iterable[Resource] = DEFAULT_RESOURCES,
        *,
        history_limit: int = 10_000,
        first_resource_version: int = 1000,
    ) -> None:
        self._cond = threading.Condition()
        self._resources: dict[tuple[str, str, str], Resource] = {}
        self._objects: dict[Resource, dict[Key, Obj]] = {}
        self._rv = first_resource_version
        self._floor = first_resource_version
        self._history: deque[Change] = deque(maxlen=history_limit)
        self._epoch = 0
        self._closed = False
        for res in resources:
            self.register(res)

    # ----- resource table ------------------------------------------------------------------
    def register(self, res: Resource) -> None:
        """Serve another kind (e.g. a CRD) from now on."""
        with self._cond:
            self._resources[(res.group, res.version, res.plural)] = res
            self._objects.setdefault(res, {})

    def resource(self, group: str, version: str, plural: str) -> Resource | None:
        return self._resources.get((group, version, plural))

    def resource_for_kind(self, kind: str) -> Resource:
        for res in self._resources.values():
            if kind in (res.kind, res.plural):
                return res
        raise KeyError(f"no resource registered for kind {kind!r}")

    @property
    def resource_version(self) -> str:
        with self._cond:
            return str(self._rv)

    # ----- direct access for tests -----------------------------------------------------------
    def put(self, obj: Obj) -> Obj:
        """Create or overwrite an object as-is (no validation, no preconditions)."""
        res = self.resource_for_kind(obj["kind"])
        body = clone(obj)
        meta = body.setdefault("metadata", {})
        if res.namespaced:
            meta.setdefault("namespace", "default")
        with self._cond:
            old = self._objects[res].get(_key(res, body))
            if old is None:
                return self._insert(res, body)
            meta["uid"] = old["metadata"]["uid"]
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            return self._commit(res, "MODIFIED", body, old)

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        res = self.resource_for_kind(kind)
        with self._cond:
            obj = self._objects[res].get(((namespace or "") if res.namespaced else "", name))
            return clone(obj) if obj is not None else None

    def objects(self, kind: str) -> list[Obj]:
        res = self.resource_for_kind(kind)
        with self._cond:
            return [clone(o) for _, o in sorted(self._objects[res].items())]

    def remove(self, kind: str, namespace: str | None, name: str) -> Obj:
        res = self.resource_for_kind(kind)
        return self.delete(res, (namespace or "") if res.namespaced else "", name)

    def compact(self) -> None:
        """Forget all history: watches from any earlier resourceVersion now get 410."""
        with self._cond:
            self._history.clear()
            self._floor = self._rv

    def end_watches(self) -> None:
        """End every open watch stream cleanly, as an API server restart or timeout would."""
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # ----- API operations (raise ApiError) -----------------------------------------------------
    def create(self, res: Resource, namespace: str, body: Obj) -> Obj:
        obj = clone(body)
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            if meta.get("namespace", namespace) != namespace:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match "
                    "the namespace sent on the request",
                )
            meta["namespace"] = namespace
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if not meta.get("name"):
            raise ApiError(422, f"{res.kind} is invalid: metadata.name: Required value")
        if meta.get("resourceVersion"):
            raise ApiError(400, "resourceVersion should not be set on objects to be created")
        _validate(res, obj)
        with self._cond:
            if _key(res, obj) in self._objects[res]:
                raise already_exists(res, meta["name"])
            return self._insert(res, obj)

    def read(self, res: Resource, namespace: str, name: str) -> Obj:
        with self._cond:
            obj = self._objects[res].get((namespace, name))
            if obj is None:
                raise not_found(res, name)
            return clone(obj)

    def snapshot(self, res: Resource, namespace: str | None) -> tuple[list[Obj], int]:
        """All objects of a kind (optionally one namespace), sorted by key, with the list RV."""
        with self._cond:
            items = [
                clone(o)
                for k, o in sorted(self._objects[res].items())
                if namespace is None or k[0] == namespace
            ]
            return items, self._rv

    def update(
        self,
        res: Resource,
        namespace: str,
        name: str,
        mutate: Callable[[Obj], Obj],
        *,
        subresource: str | None = None,
    ) -> Obj:
        """Read-modify-write under the lock; an RV left in the result is a precondition."""
        with self._cond:
            cur = self._objects[res].get((namespace, name))
            if cur is None:
                raise not_found(res, name)
            new = mutate(clone(cur))
            sent_rv = (new.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != cur["metadata"]["resourceVersion"]:
                raise conflict(res, name, STALE)
            new = self._reconcile(res, cur, new, subresource)
            _validate(res, new)
            if _same_but_volatile(new, cur):
                return clone(cur)
            return self._commit(res, "MODIFIED", new, cur)

    def delete(
        self, res: Resource, namespace: str, name: str, preconditions: dict[str, Any] | None = None
    ) -> Obj:
        with self._cond:
            cur = self._objects[res].get((namespace, name))
            if cur is None:
                raise not_found(res, name)
            meta = cur["metadata"]
            for field in ("uid", "resourceVersion"):
                want = (preconditions or {}).get(field)
                if want and want != meta[field]:
                    raise conflict(
                        res,
                        name,
                        f"Precondition failed: {field} in precondition: "
                        f"{want}, {field} in object meta: {meta[field]}",
                    )
            del self._objects[res][(namespace, name)]
            return self._commit(res, "DELETED", clone(cur), cur, store=False)

    def changes_after(self, after: int, timeout: float, epoch: int) -> tuple[list[Change], int]:
        """Block until there are changes newer than `after` (or timeout); return them and the RV."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed or self._epoch != epoch:
                    raise WatchClosed
                if after < self._floor:
                    raise ApiError(
                        410, f"too old resource version: {after} ({self._floor})", "Expired"
                    )
                if self._rv > after:
                    return [c for c in self._history if c.rv > after], self._rv
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return [], after
                self._cond.wait(remaining)

    def expired(self, rv: int) -> bool:
        """True when history before `rv` is gone, so a watch from it must get 410."""
        with self._cond:
            return rv < self._floor

    @property
    def watch_epoch(self) -> int:
        with self._cond:
            return self._epoch

    # ----- internals (call with the lock held) --------------------------------------------------
    def _insert(self, res: Resource, obj: Obj) -> Obj:
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        if "spec" in obj:
            meta["generation"] = 1
        if res.kind == "Pod":
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        return self._commit(res, "ADDED", obj, None)

    def _reconcile(self, res: Resource, cur: Obj, new: Obj, subresource: str | None) -> Obj:
        if res.has_status and subresource == "status":
            result = clone(cur)
            result["status"] = new.get("status", {})
            if res.status_keeps_metadata:
                for field in ("labels", "annotations"):
                    value = new.get("metadata", {}).get(field)
                    if value is None:
                        result["metadata"].pop(field, None)
                    else:
                        result["metadata"][field] = value
            return result
        if res.has_status and subresource is None:  # main-resource writes keep the status
            new["status"] = clone(cur.get("status", {}))
        meta = new.setdefault("metadata", {})
        for field in ("name", "namespace", "uid", "creationTimestamp", "generation"):
            if field in cur["metadata"]:
                meta[field] = cur["metadata"][field]
        if new.get("spec") != cur.get("spec") and "generation" in meta:
            meta["generation"] += 1
        return new

    def _commit(
        self, res: Resource, kind: str, obj: Obj, old: Obj | None, *, store: bool = True
    ) -> Obj:
        self._rv += 1
        obj["kind"], obj["apiVersion"] = res.kind, res.api_version
        obj["metadata"]["resourceVersion"] = str(self._rv)
        if store:
            self._objects[res][_key(res, obj)] = obj
        if len(self._history) == self._history.maxlen:
            self._floor = self._history[0].rv
        self._history.append(
            Change(
                self._rv,
                kind,
                res,
                clone(obj),
                clone(old) if old is not None else None,
            )
        )
        self._cond.notify_all()
        return clone(obj)
