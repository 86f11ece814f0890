"""A fake Kubernetes API server over real HTTP, for tests that use the real `kubernetes` client.

`FakeApiServer` runs a stdlib `ThreadingHTTPServer` on 127.0.0.1 with an ephemeral port. It
speaks enough of the API for the official Python client to work unchanged: typed CRUD, the three
patch types, selectors, `limit`/`continue`, pods/binding and the status subresources, and watch
streams (chunked JSON lines, BOOKMARK on request, 410 for a compacted resourceVersion).

Tests steer it with `inject()` (status codes, delays, dropped connections for matching requests),
reach the objects with `server.store`, and read back what was sent from `server.requests`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from tests.kubeapi.handlers import Api, Reply, WatchRequest
from tests.kubeapi.resources import ApiError, default_reason
from tests.kubeapi.store import Change, Obj, Store, WatchClosed


@dataclass
class Fault:
    """One programmed misbehaviour; `times=None` means every matching request, forever."""

    method: str | None
    pattern: re.Pattern[str]
    status: int | None
    times: int | None
    delay: float
    reason: str | None
    message: str | None
    drop: bool
    hits: int = 0

    def claim(self, method: str, target: str) -> bool:
        if self.method not in (None, method) or not self.pattern.search(target):
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        self.hits += 1
        return True


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any


class FakeApiServer:
    """Start with `start()` or a `with` block; `url` is the base URL for the client."""

    def __init__(
        self,
        store: Store | None = None,
        *,
        watch_expired: Literal["event", "http"] = "event",
        bookmark_interval: float | None = None,
        max_watch_seconds: float = 300.0,
    ) -> None:
        self.store = store or Store()
        self.api = Api(self.store)
        self.watch_expired = watch_expired
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        self._faults: list[Fault] = []
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeApiServer:
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fake-kube-apiserver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.store.close()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api_client(self) -> Any:
        """A new `kubernetes.client.ApiClient` pointed at this server (no auth); close it after."""
        from kubernetes import client

        config = client.Configuration()
        config.host = self.url
        return client.ApiClient(config)

    # ----- fault injection and request log -------------------------------------------------------
    def inject(
        self,
        method: str | None = None,
        path_regex: str = ".*",
        *,
        status: int | None = None,
        times: int | None = 1,
        delay: float = 0.0,
        reason: str | None = None,
        message: str | None = None,
        drop: bool = False,
    ) -> Fault:
        """Misbehave on matching requests: sleep `delay` s, then answer `status` or drop the
        connection (or, with neither, serve the request normally after the delay).

        `path_regex` is searched in the request target, query string included, so
        `r"/pods\\?.*watch=true"` picks out pod watches. Faults are tried in the order added.
        """
        fault = Fault(
            method.upper() if method else None,
            re.compile(path_regex),
            status,
            times,
            delay,
            reason,
            message,
            drop,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _claim_fault(self, method: str, target: str) -> Fault | None:
        with self._lock:
            return next((f for f in self._faults if f.claim(method, target)), None)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeApiServer


def _watch_event(change: Change, watch: WatchRequest) -> Obj | None:
    """What a watcher with this filter sees for one change, or None (as the real server does,
    an object that stops matching the selector arrives as DELETED, one that starts as ADDED)."""
    if change.resource is not watch.res:
        return None
    if watch.namespace and change.obj["metadata"].get("namespace") != watch.namespace:
        return None
    now = watch.match(change.obj)
    before = change.old is not None and change.type == "MODIFIED" and watch.match(change.old)
    if change.type != "MODIFIED":
        kind = change.type if now else None
    else:
        kind = {(True, True): "MODIFIED", (True, False): "ADDED", (False, True): "DELETED"}.get(
            (now, before)
        )
    return {"type": kind, "object": change.obj} if kind else None


class _Handler(BaseHTTPRequestHandler):
    # Answer small replies at once instead of waiting ~40 ms for Nagle's algorithm, as a real
    # API server (Go's net/http) does.
    disable_nagle_algorithm = True

    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        content_type = self.headers.get("Content-Type") or "application/json"
        try:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = self._decode(raw)
            fake._record(RecordedRequest(method, url.path, query, content_type, body))
            if self._misbehave(fake._claim_fault(method, self.path)):
                return
            result = fake.api.handle(method, url.path, query, content_type, body)
            if isinstance(result, Reply):
                self._send_json(result.status, result.body)
            else:
                self._stream_watch(result)
        except ApiError as e:
            self._send_json(e.code, e.status())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    @staticmethod
    def _decode(raw: bytes) -> Any:
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, f"request body is not valid JSON: {e}") from e

    def _misbehave(self, fault: Fault | None) -> bool:
        if fault is None:
            return False
        if fault.delay:
            time.sleep(fault.delay)
        if fault.drop:
            self.close_connection = True
            return True
        if fault.status is None:
            return False
        reason = fault.reason or default_reason(fault.status)
        message = fault.message or f"injected fault: {fault.status} {reason}"
        self._send_json(fault.status, ApiError(fault.status, message, reason).status())
        return True

    def _send_json(self, status: int, body: Obj) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _write_chunk(self, event: Obj) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream_watch(self, watch: WatchRequest) -> None:
        fake, store = self.server.fake, self.server.fake.store
        epoch = store.watch_epoch
        initial: list[Obj] = []
        if watch.resource_version in ("", "0"):
            items, rv = store.snapshot(watch.res, watch.namespace)
            initial = [{"type": "ADDED", "object": o} for o in items if watch.match(o)]
        elif not watch.resource_version.isdigit():
            raise ApiError(400, f"invalid resource version {watch.resource_version!r}")
        else:
            rv = int(watch.resource_version)
            if store.expired(rv) and fake.watch_expired == "http":
                raise ApiError(410, f"too old resource version: {rv}", "Expired")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        for event in initial:
            self._write_chunk(event)
        self._follow(watch, rv, epoch)
        self.wfile.write(b"0\r\n\r\n")

    def _follow(self, watch: WatchRequest, rv: int, epoch: int) -> None:
        fake = self.server.fake
        deadline = time.monotonic() + (watch.timeout or fake.max_watch_seconds)
        tick = fake.bookmark_interval if watch.bookmarks and fake.bookmark_interval else 5.0
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                changes, newest = fake.store.changes_after(rv, min(remaining, tick), epoch)
            except WatchClosed:
                return
            except ApiError as e:
                self._write_chunk({"type": "ERROR", "object": e.status()})
                return
            for change in changes:
                if (event := _watch_event(change, watch)) is not None:
                    self._write_chunk(event)
            rv = newest
            if not changes and watch.bookmarks and fake.bookmark_interval:
                self._write_chunk(
                    {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": watch.res.kind,
                            "apiVersion": watch.res.api_version,
                            "metadata": {"resourceVersion": str(rv)},
                        },
                    }
                )
