"""A minimal HTTPS client for the real API server, as one identity (client certificate or token).

The tests speak to the API server as several users (admin, each vgpu service account, a plain
user); one small client with plain dicts keeps what each request sends and gets visible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import urllib3

Obj = dict[str, Any]


class ApiError(Exception):
    """A non-2xx reply: `status` and the Status object the server sent (reason, message)."""

    def __init__(self, method: str, path: str, status: int, body: Obj) -> None:
        self.status, self.body = status, body
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", ""))
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}")


@dataclass(frozen=True)
class Identity:
    """Who a request is made as: a client certificate pair or a bearer token."""

    name: str
    cert: str | None = None
    key: str | None = None
    token: str | None = None


class Rest:
    """JSON requests to `base` (https://127.0.0.1:PORT) verified against the cluster CA."""

    def __init__(self, base: str, ca: str, who: Identity, timeout: float = 30.0) -> None:
        self.base, self.who = base, who
        self._headers = {"Accept": "application/json"}
        if who.token:
            self._headers["Authorization"] = f"Bearer {who.token}"
        self._pool = urllib3.PoolManager(
            ca_certs=ca,
            cert_reqs="CERT_REQUIRED",
            cert_file=who.cert,
            key_file=who.key,
            timeout=urllib3.Timeout(total=timeout),
            retries=False,
        )

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Obj:
        headers = dict(self._headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        reply = self._pool.request(method, self.base + path, body=data, headers=headers)
        text = reply.data.decode() if reply.data else ""
        try:
            parsed: Obj = json.loads(text) if text else {}
        except json.JSONDecodeError:
            parsed = {"message": text}
        if reply.status >= 300:
            raise ApiError(method, path, reply.status, parsed)
        return parsed

    def get(self, path: str) -> Obj:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Obj:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> Obj:
        return self.request("PUT", path, body)

    def delete(self, path: str) -> Obj:
        return self.request("DELETE", path)

    def merge_patch(self, path: str, body: Any) -> Obj:
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def close(self) -> None:
        self._pool.clear()
