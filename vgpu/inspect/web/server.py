"""The web view's HTTP server: the standard library's `ThreadingHTTPServer`, GET and HEAD only.

Read-only by construction: no route changes anything and other methods are refused (501, the
standard library's answer). Every page comes from the `Refresher`'s newest view; a page that
fails to render answers 500 with one line and the server goes on. Headers keep the browser
to the process's own assets (a Content-Security-Policy without inline scripts or styles).

In the cluster it listens on all addresses, so what a client costs is bounded
(`vgpu.adapters.bounded_http`): at most `MAX_CLIENTS` connections are answered at once (more are
closed at once, without a thread), and each is closed `REQUEST_S` seconds after it opened,
answered or not. Before, a connection that sent nothing held a thread for ever, and a pod's few
thousand took the view's threads, its memory and its probes.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from importlib import resources
from urllib.parse import parse_qs, urlsplit

from vgpu.adapters.bounded_http import BoundedServer
from vgpu.inspect.web.detail import node_page, pod_page
from vgpu.inspect.web.pages import cluster_page
from vgpu.inspect.web.queuepage import queues_page
from vgpu.inspect.web.refresh import Refresher
from vgpu.inspect.web.shares import Shares, own
from vgpu.inspect.web.view import Filter, document

MAX_CLIENTS = 64  # connections answered at once: a few browsers polling, the kubelet's probes
REQUEST_S = 30.0
"""A connection's whole life, request and answer: a first pod page of a large cluster takes up
to 2 s to plan and `/api/view.json` is megabytes through a port-forward; the probes' own timeout
is 5 s."""

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def assets() -> dict[str, tuple[str, bytes]]:
    """The served files: path -> (content type, bytes); the stylesheet's fill widths
    `w0`..`w100` are generated (the pages use classes, never inline styles)."""
    folder = resources.files("vgpu.inspect.web") / "assets"
    css = (folder / "view.css").read_text(encoding="utf-8")
    css += "".join(f".w{i}{{width:{i}%}}" for i in range(101)) + "\n"
    return {
        "/assets/view.css": ("text/css; charset=utf-8", css.encode()),
        "/assets/view.js": (
            "text/javascript; charset=utf-8",
            (folder / "view.js").read_bytes(),
        ),
    }


Params = Mapping[str, str]


def route(
    refresher: Refresher, path: str, params: Params, shares: Shares | None = None
) -> tuple[int, str, bytes]:
    """The answer to GET `path`: status, content type, body. `shares`: the queues chart's
    samples (default: the view's own)."""
    view, status = refresher.current()
    html = "text/html; charset=utf-8"
    if path == "/":
        f = Filter(params.get("model", ""), params.get("node", ""),
                   params.get("namespace", ""), params.get("q", ""))  # fmt: skip
        number = int(params["page"]) if params.get("page", "").isdigit() else 1
        return 200, html, cluster_page(view, f, number, status).encode()
    if path == "/queues":
        samples, source = (shares or own(refresher.samples))()
        return 200, html, queues_page(view, status, samples, source).encode()
    pages: dict[str, Callable[..., str | None]] = {"/node": node_page, "/pod": pod_page}
    if path in pages:
        text = pages[path](view, params.get("name", ""), status)
        if text is None:
            return 404, "text/plain; charset=utf-8", b"not in the report\n"
        return 200, html, text.encode()
    if path == "/api/view.json":
        return 200, "application/json", json.dumps(document(view, status)).encode()
    if path == "/api/status.json":
        return 200, "application/json", json.dumps(status).encode()
    if path == "/healthz":
        return 200, "text/plain; charset=utf-8", b"ok\n"
    return 404, "text/plain; charset=utf-8", b"no such page\n"


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def host_allowed(host_header: str | None, loopback: bool) -> bool:
    """Whether to answer a request naming this Host. Bound to a loopback address, the view
    answers only requests for a loopback name: a web page elsewhere that rebinds its own DNS
    name to 127.0.0.1 cannot make the browser read the cluster's pods through it. Bound to
    other addresses (the chart's Service), any name is the operator's choice."""
    if not loopback:
        return True
    host = (host_header or "").strip().lower()
    if host.startswith("["):  # [::1]:8080
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return host in LOOPBACK_NAMES


def handler(
    refresher: Refresher,
    files: Mapping[str, tuple[str, bytes]],
    *,
    loopback: bool = False,
    shares: Shares | None = None,
) -> type:
    class Handler(BaseHTTPRequestHandler):
        server_version = "vgpu-inspect"
        sys_version = ""

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _answer(self, *, body: bool) -> None:
            url = urlsplit(self.path)
            params = {k: v[0] for k, v in parse_qs(url.query).items()}
            try:
                if not host_allowed(self.headers.get("Host"), loopback):
                    code, kind, data = 421, "text/plain; charset=utf-8", b"unknown Host\n"
                elif url.path in files:
                    code, kind, data = 200, *files[url.path]
                else:
                    code, kind, data = route(refresher, url.path, params, shares)
            except Exception as e:
                print(f"vgpu inspect --serve: {url.path}: {e!r}", file=sys.stderr)
                code, kind, data = 500, "text/plain; charset=utf-8", b"the page failed\n"
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            if body:
                self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: a poll every few seconds per open page would flood the log."""

    return Handler


def make_server(
    refresher: Refresher,
    address: str,
    port: int,
    shares: Shares | None = None,
    *,
    max_clients: int = MAX_CLIENTS,
    request_s: float = REQUEST_S,
) -> BoundedServer:
    """The view's server, answering at most `max_clients` connections at once, each for at
    most `request_s` seconds (module doc)."""
    files = assets()
    return BoundedServer(
        (address, port),
        handler(refresher, files, loopback=_loopback(address), shares=shares),
        max_clients,
        request_s,
        name="vgpu-inspect-web-reaper",
    )


def _loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
