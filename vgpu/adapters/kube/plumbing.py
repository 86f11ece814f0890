"""The request plumbing under every `KubeApi` call: one request, a page-through list, a watch.

Requests go through the client's request layer (`vgpu.adapters.kube.request`); replies are parsed
here as plain dicts (`vgpu.adapters.fastjson`), lists are paged (`limit`/`continue`) and watches
are reflected (`vgpu.adapters.kube.reflector`: list, then watch from its version, again on expiry).
Every client and socket error leaves as a `KubeError` (`vgpu.adapters.kube.errors`), so the verbs
in `vgpu.adapters.kube.calls` never see the client's exceptions.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import urllib3
from kubernetes.client.exceptions import ApiException

from vgpu.adapters import fastjson
from vgpu.adapters.kube.errors import KubeExpired, KubeUnavailable, translate
from vgpu.adapters.kube.reflector import Listing, Reflector, WatchEvent
from vgpu.adapters.kube.request import Requester

Obj = dict[str, Any]
Params = Mapping[str, str]  # path template fields
Query = Mapping[str, object]  # wire-named query parameters; None values are left out


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """Where a watch starts (None: a fresh list), when it stops, and its timing."""

    since: str | None
    stop: threading.Event | None
    timeout: int
    retry_delay: float


def selectors(label_selector: str | None, field_selector: str | None) -> Query:
    return {"labelSelector": label_selector, "fieldSelector": field_selector}


class KubeWire:
    """Requests over one `ApiClient` with a default timeout and list page size."""

    def __init__(self, api_client: Any, *, timeout: float, page_size: int) -> None:
        self.timeout = timeout
        self._page_size = page_size
        self._requests = Requester(api_client)

    def raw(self, what: str, method: str, path: str, params: Params, **kwargs: Any) -> Any:
        """The unread reply (the caller releases its connection); `what` names the call in
        errors."""
        kwargs.setdefault("timeout", self.timeout)
        try:
            return self._requests.send(method, path, params=params, **kwargs)
        except ApiException as e:
            raise translate(what, e) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: {type(e).__name__}: {e}") from e

    def call(self, what: str, method: str, path: str, params: Params, **kwargs: Any) -> Obj:
        """The reply's JSON object."""
        resp = self.raw(what, method, path, params, **kwargs)
        try:
            return cast(Obj, fastjson.loads(resp.data))
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeUnavailable(f"{what}: reading the reply failed: {e}") from e
        finally:
            resp.release_conn()

    def list_all(self, what: str, kind: str, path: str, params: Params, query: Query) -> Listing:
        """Page through a list; items get `kind`/`apiVersion` like watch objects have."""
        items: list[Obj] = []
        token: str | None = None
        version = ""
        while True:
            page_query = {**query, "limit": self._page_size, "continue": token}
            page = self.call(what, "GET", path, params, query=page_query)
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
        resp = self.raw(
            what, "GET", path, params, query=watch_query, timeout=(self.timeout, timeout + 30)
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

    def reflect(
        self,
        what: str,
        kind: str,
        path: str,
        params: Params,
        query: Query,
        watch: WatchOptions,
    ) -> Iterator[WatchEvent]:
        """List, then watch from the list's version, for ever (`vgpu.adapters.kube.reflector`)."""
        sel = {k: v for k, v in query.items() if v}
        return Reflector(
            lambda: self.list_all(what, kind, path, params, sel),
            lambda since: self._watch_stream(what, path, params, sel, watch.timeout, since),
            expired=KubeExpired,
            transient=KubeUnavailable,
            start_version=watch.since,
            stop=watch.stop,
            retry_delay=watch.retry_delay,
        ).events()
