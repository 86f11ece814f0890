"""Prometheus's HTTP API, read-only: instant queries (`/api/v1/query`, the report's real use) and
range queries (`/api/v1/query_range`, the web view's share over time).

Translates, decides nothing: a range query's series come back as (labels, [(time, value)]) and
any failure (unreachable, an HTTP error, an answer that is not a matrix) as one
`PrometheusError` line.
Standard library only (urllib), so the view needs no client package.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from vgpu.core.errors import VgpuError

Series = tuple[Mapping[str, str], list[tuple[float, float]]]


class PrometheusError(VgpuError):
    """The query could not be answered; the message says why. `body` is Prometheus's own JSON
    answer where an HTTP error carried one (it says why in its `error`)."""

    def __init__(self, message: str, body: Any = None) -> None:
        super().__init__(message)
        self.body = body


def get_json(base_url: str, path: str, params: Mapping[str, str], timeout_s: float) -> Any:
    """The JSON Prometheus answers a GET of `path` with `params`."""
    url = f"{base_url.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as e:
        try:
            body = json.loads(e.read())
        except ValueError:
            body = None
        raise PrometheusError(f"Prometheus at {base_url} answered {e.code} {e.reason}", body) from e
    except (urllib.error.URLError, OSError) as e:
        raise PrometheusError(f"cannot reach Prometheus at {base_url}: {e}") from e
    except ValueError as e:
        raise PrometheusError(f"Prometheus at {base_url} did not answer JSON") from e


def instant(base_url: str, query: str, timeout_s: float = 5.0) -> Any:
    """Prometheus's whole answer to the instant `query` (its caller reads the vector)."""
    return get_json(base_url, "/api/v1/query", {"query": query}, timeout_s)


def query_range(
    base_url: str, query: str, start: float, end: float, step_s: float, timeout_s: float = 5.0
) -> list[Series]:
    """The matrix `query` gives from `start` to `end` (seconds since the epoch) every `step_s`;
    NaN and infinite points are left out."""
    params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
    body = get_json(base_url, "/api/v1/query_range", params, timeout_s)
    data = body.get("data") if isinstance(body, dict) else None
    if body.get("status") != "success" or not isinstance(data, dict):
        raise PrometheusError(f"Prometheus at {base_url} refused the query: {body.get('error')}")
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"Prometheus at {base_url} answered {data.get('resultType')!r}")
    out: list[Series] = []
    for item in data.get("result") or []:
        points = [(float(t), float(v)) for t, v in item.get("values") or []]
        out.append((dict(item.get("metric") or {}), [p for p in points if math.isfinite(p[1])]))
    return out
