"""Asking Prometheus for the agents' real-use figures (`vgpu.inspect.real_use`).

Plain HTTP(S) GETs of the query API (`/api/v1/query`), read-only, with a short timeout: a
Prometheus that cannot be reached makes the column "-" with one line saying why, never a
failed report (the grants are still worth seeing).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from vgpu.inspect.real_use import QUERIES, RealUse, from_answers

TIMEOUT_S = 5.0


def read_real_use(url: str, *, timeout: float = TIMEOUT_S) -> RealUse:
    """Real use per GPU from the Prometheus at `url` (e.g. http://prometheus:9090)."""
    base = url.rstrip("/")
    answers: dict[str, Any] = {}
    for query in QUERIES:
        target = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query})
        try:
            with urllib.request.urlopen(target, timeout=timeout) as reply:
                answers[query] = json.loads(reply.read().decode("utf-8"))
        except urllib.error.HTTPError as err:  # Prometheus puts its reason in the body
            try:
                answers[query] = json.loads(err.read().decode("utf-8"))
            except ValueError:
                return RealUse(url, {}, f"{url} answered HTTP {err.code}")
        except (OSError, ValueError) as err:
            return RealUse(url, {}, f"cannot ask {url}: {err}")
    return from_answers(url, answers)
