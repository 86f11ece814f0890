"""A lean JSON POST for the extender's hot path (the Binding), with the client's credentials.

`Requester` goes through the official client's request layer (`param_serialize`, `call_api`,
urllib3's pool manager), which costs about 230 µs of Python per request; a POST on a kept-alive
`http.client` connection costs about 75 µs (both measured against the fake API server without
TLS, whose cost is the same for both; bench/bind_client.py). The extender makes one such request
per pod, on the worker threads kube-scheduler's asynchronous binds keep busy, so each thread keeps
one connection of its own.

Same credentials and checks as the client's: its `Configuration`'s host, CA (file or data),
client certificate, `verify_ssl`, `assert_hostname: false` and the bearer token read per request
from its `auth_settings()` (which runs the in-cluster loader's refresh hook). A
configuration this does not cover (a proxy, another name to verify than the host's) gets no
poster: callers use `Requester` then.
A non-2xx reply becomes the client's `ApiException` so errors are translated as everywhere else.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

from kubernetes.client.exceptions import ApiException

JSON = "application/json"


class LeanPoster:
    """POSTs JSON bodies to one API server, a kept-alive connection per calling thread."""

    def __init__(self, configuration: Any, user_agent: str) -> None:
        self._config = configuration
        self._agent = user_agent
        url = urlsplit(configuration.host)
        self._https = url.scheme == "https"
        self._host, self._port = url.hostname or "localhost", url.port
        self._prefix = url.path.rstrip("/")
        self._context = _context(configuration) if self._https else None
        self._local = threading.local()

    @classmethod
    def for_client(cls, api_client: Any) -> LeanPoster | None:
        """A poster sharing `api_client`'s configuration, or None where it would differ."""
        config = getattr(api_client, "configuration", None)
        host = getattr(config, "host", None)
        if config is None or getattr(config, "proxy", None) or not isinstance(host, str):
            return None
        if getattr(config, "tls_server_name", None) or isinstance(
            getattr(config, "assert_hostname", None), str
        ):
            return None  # another name to check than the host's: the client's path does that
        if urlsplit(host).scheme not in ("http", "https"):
            return None
        return cls(config, str(getattr(api_client, "user_agent", "vgpu")))

    def post(self, path: str, body: bytes, timeout: float) -> bytes:
        """The reply body of POST `path`; non-2xx → `ApiException`, transport → `OSError` or
        `http.client.HTTPException`. Never sent twice: as urllib3 does, a kept-alive connection
        the server has closed is replaced before sending, and a failure after is the caller's
        (the outcome is unknown; the binder reads the pod back)."""
        headers = {"Content-Type": JSON, "Accept": JSON, "User-Agent": self._agent}
        # The client's own auth settings: the loaders store the token as `BearerToken`, with the
        # `authorization` alias, and the lookup runs the in-cluster loader's refresh hook.
        bearer = self._config.auth_settings().get("BearerToken")
        if bearer and bearer.get("value"):
            headers[str(bearer["key"]).title()] = str(bearer["value"])
        conn = self._connection(timeout)
        try:
            conn.request("POST", self._prefix + path, body, headers)
            reply = conn.getresponse()
            data = reply.read()
        except BaseException:
            self._local.conn = None
            conn.close()
            raise
        if reply.will_close:
            self._local.conn = None
            conn.close()
        if not 200 <= reply.status <= 299:
            raise ApiException(
                status=reply.status, reason=reply.reason, body=data.decode(errors="replace")
            )
        return data

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None and _dropped(conn.sock):
            conn.close()
            conn = None
        if conn is None:
            if self._context is not None:
                conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=self._context
                )
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def close(self) -> None:
        """Close the calling thread's connection (others close with their threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _context(config: Any) -> ssl.SSLContext:
    """The client's TLS settings as an `ssl.SSLContext`."""
    context = ssl.create_default_context(cafile=config.ssl_ca_cert, cadata=config.ca_cert_data)
    if not config.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.assert_hostname is False:
        context.check_hostname = False
    if config.cert_file:
        context.load_cert_chain(config.cert_file, config.key_file)
    return context


def _dropped(sock: socket.socket) -> bool:
    """Whether an idle kept-alive connection was closed by the server: readable with nothing
    asked means end of stream (or a stray byte; either way it cannot carry a request)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
