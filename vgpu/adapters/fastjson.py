"""JSON for the API server's replies and watch streams: `orjson` when installed, else the
standard library, with the same results.

Watches decode every version of every pod and node the cluster writes, so decoding is on the
extender's hot path (`orjson` comes with the `extender` extra; the node agent may lack it). What
`orjson` refuses (NaN, integers beyond 64 bits) is handed to the standard library, which decides.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_fast_loads: Callable[[bytes], Any] | None
_fast_dumps: Callable[[Any], bytes] | None
try:
    import orjson

    _fast_loads, _fast_dumps = orjson.loads, orjson.dumps
except ImportError:  # pragma: no cover - orjson is optional
    _fast_loads = _fast_dumps = None


def loads(data: bytes) -> Any:
    """Decode one JSON document (raises `ValueError` when it is not one)."""
    if _fast_loads is not None:
        try:
            return _fast_loads(data)
        except ValueError:
            pass  # the standard library decides what orjson refuses
    return json.loads(data)


def dumps(doc: Any) -> bytes:
    """Encode a decoded document back to compact JSON bytes. Infinite and NaN floats, which JSON
    cannot carry and the API server never writes, come out as `null` with orjson."""
    if _fast_dumps is not None:
        try:
            return _fast_dumps(doc)
        except TypeError:
            pass  # integers beyond 64 bits: the standard library writes them
    return json.dumps(doc, separators=(",", ":")).encode()
