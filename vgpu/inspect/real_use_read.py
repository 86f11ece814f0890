"""Asking Prometheus for the agents' real-use figures (`vgpu.inspect.real_use`).

Plain HTTP(S) GETs of the query API (`/api/v1/query`), read-only, with a short timeout: a
Prometheus that cannot be reached makes the column "-" with one line saying why, never a
failed report (the grants are still worth seeing).
"""

from __future__ import annotations

from typing import Any

from vgpu.adapters.prometheus import PrometheusError, instant
from vgpu.inspect.real_use import QUERIES, RealUse, from_answers

TIMEOUT_S = 5.0


def read_real_use(url: str, *, timeout: float = TIMEOUT_S) -> RealUse:
    """Real use per GPU from the Prometheus at `url` (e.g. http://prometheus:9090)."""
    answers: dict[str, Any] = {}
    for query in QUERIES:
        try:
            answers[query] = instant(url, query, timeout_s=timeout)
        except PrometheusError as err:
            if err.body is None:
                return RealUse(url, {}, f"cannot ask {url}: {err}")
            answers[query] = err.body  # Prometheus says why in it
    return from_answers(url, answers)
