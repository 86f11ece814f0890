"""Create objects from the repository's manifests (daemonset/) on the real API server.

No kubectl here: each document's REST path comes from its apiVersion and kind (plural names are
regular for every kind the manifests use, plus the -y/-ies rule), and it is POSTed as is. An
object that already exists is left alone (409), so `apply_file` can run against a cluster
that is already set up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.realk8s.rest import ApiError, Obj, Rest


def plural(kind: str) -> str:
    """The resource name of a kind: Policy -> policies, Role -> roles."""
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    if lower.endswith("s"):
        return lower + "es"
    return lower + "s"


def collection_path(obj: Obj) -> str:
    """The URL path where `obj` is created."""
    api_version = str(obj["apiVersion"])
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    namespace = obj.get("metadata", {}).get("namespace")
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{prefix}{where}/{plural(str(obj['kind']))}"


def object_path(obj: Obj) -> str:
    return f"{collection_path(obj)}/{obj['metadata']['name']}"


def load_documents(path: Path) -> list[Obj]:
    with path.open() as f:
        return [doc for doc in yaml.safe_load_all(f) if isinstance(doc, dict)]


def create(rest: Rest, obj: Obj) -> Obj:
    """Create `obj`; an existing object of that name is returned unchanged."""
    try:
        return rest.post(collection_path(obj), obj)
    except ApiError as err:
        if err.status != 409:
            raise
        return rest.get(object_path(obj))


def apply_file(rest: Rest, path: Path, skip_kinds: frozenset[str] = frozenset()) -> list[Obj]:
    """Create every document of a manifest file, in file order; `skip_kinds` are left out."""
    return [create(rest, doc) for doc in load_documents(path) if doc["kind"] not in skip_kinds]


def service_account_token(
    rest: Rest,
    namespace: str,
    name: str,
    seconds: int = 86400,
    bound: dict[str, str] | None = None,
) -> str:
    """A bound token for a service account, through the TokenRequest API (as the kubelet does).

    `bound` is a `boundObjectRef` (kind, apiVersion, name, uid): a token bound to a Node carries
    that node's name in the user's extra `authentication.kubernetes.io/node-name`, as a token
    bound to a pod on that node does (KEP-4193; Node binding GA since 1.33)."""
    spec: dict[str, Any] = {"expirationSeconds": seconds}
    if bound is not None:
        spec["boundObjectRef"] = bound
    request: dict[str, Any] = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": spec,
    }
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
    return str(rest.post(path, request)["status"]["token"])
