"""The `resource.k8s.io/v1` calls the DRA driver makes, on top of `KubeApi`.

ResourceSlices are cluster-scoped; the driver owns one per node (created, replaced with the
resourceVersion it read, deleted on request). ResourceClaims are read: one claim by name when
the kubelet asks to prepare it, and all claims to learn what is allocated on this node.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from vgpu.adapters.kube.calls import KubeApi, KubeNotFound, Listing, WatchEvent
from vgpu.adapters.kube.plumbing import WatchOptions

Obj = dict[str, Any]
GROUP = "/apis/resource.k8s.io/v1"
SLICES = GROUP + "/resourceslices"
SLICE = SLICES + "/{name}"
CLAIMS = GROUP + "/namespaces/{namespace}/resourceclaims"
CLAIM = CLAIMS + "/{name}"
ALL_CLAIMS = GROUP + "/resourceclaims"


class DraKubeApi(KubeApi):
    """`KubeApi` plus the DRA objects."""

    def get_resource_claim(self, namespace: str, name: str) -> Obj:
        return self._wire.call(
            f"get resourceclaim {namespace}/{name}",
            "GET",
            CLAIM,
            {"namespace": namespace, "name": name},
        )

    def list_resource_claims(self) -> Listing:
        listing = self._wire.list_all("list resourceclaims", "ResourceClaim", ALL_CLAIMS, {}, {})
        for item in listing.items:
            item["apiVersion"] = "resource.k8s.io/v1"
        return listing

    def list_resource_slices(self) -> Listing:
        listing = self._wire.list_all("list resourceslices", "ResourceSlice", SLICES, {}, {})
        for item in listing.items:
            item["apiVersion"] = "resource.k8s.io/v1"
        return listing

    def watch_resource_claims(
        self, *, stop: threading.Event | None = None, timeout_seconds: int = 300
    ) -> Iterator[WatchEvent]:
        """Endless (type, claim) stream over all namespaces (`vgpu.adapters.kube.reflector`)."""
        watch = WatchOptions(None, stop, timeout_seconds, 1.0)
        return self._wire.reflect(
            "watch resourceclaims", "ResourceClaim", ALL_CLAIMS, {}, {}, watch
        )

    def get_resource_slice(self, name: str) -> Obj | None:
        try:
            return self._wire.call(f"get resourceslice {name}", "GET", SLICE, {"name": name})
        except KubeNotFound:
            return None

    def create_resource_slice(self, body: Mapping[str, Any]) -> Obj:
        name = body["metadata"]["name"]
        return self._wire.call(f"create resourceslice {name}", "POST", SLICES, {}, body=dict(body))

    def replace_resource_slice(self, body: Mapping[str, Any]) -> Obj:
        name = body["metadata"]["name"]
        return self._wire.call(
            f"replace resourceslice {name}", "PUT", SLICE, {"name": name}, body=dict(body)
        )

    def delete_resource_slice(self, name: str) -> None:
        with contextlib.suppress(KubeNotFound):
            self._wire.call(f"delete resourceslice {name}", "DELETE", SLICE, {"name": name})
