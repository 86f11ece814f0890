"""Prometheus's HTTP API, read-only: one range query (`/api/v1/query_range`).

Translates, decides nothing: the series come back as (labels, [(time, value)]) and any failure
(unreachable, an HTTP error, an answer that is not a matrix) as one `PrometheusError` line.
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
    """The query could not be answered; the message says why."""


def query_range(
    base_url: str, query: str, start: float, end: float, step_s: float, timeout_s: float = 5.0
) -> list[Series]:
    """The matrix `query` gives from `start` to `end` (seconds since the epoch) every `step_s`;
    NaN and infinite points are left out."""
    params = urllib.parse.urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
    )
    url = f"{base_url.rstrip('/')}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            body: Any = json.loads(answer.read())
    except urllib.error.HTTPError as e:
        raise PrometheusError(f"Prometheus at {base_url} answered {e.code} {e.reason}") from e
    except (urllib.error.URLError, OSError) as e:
        raise PrometheusError(f"cannot reach Prometheus at {base_url}: {e}") from e
    except ValueError as e:
        raise PrometheusError(f"Prometheus at {base_url} did not answer JSON") from e
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
