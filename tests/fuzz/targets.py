"""Fuzz targets: the parsers that read what any client or pod author sends.

Each target takes arbitrary bytes and must end in a value or in the parser's own error
(`HttpError`, `BadRequest`, `InvalidRequest`), never in another exception, and in bounded work.
They run under atheris (coverage-guided, `python -m tests.fuzz.run TARGET`) and, in the normal
suite, briefly under atheris or, without it, under hypothesis (tests/fuzz/test_fuzz.py).

* `http_request`: the extender's HTTP/1.1 request reader (request line, headers, bodies of
  Content-Length or chunked), over an asyncio stream fed with the bytes.
* `wire`: the extender's JSON decoders (filter/prioritize with and without the names memo,
  bind, preempt) and the pod reader behind them (`ClusterCache.parse`).
* `quantity`: the Kubernetes quantity parser and its conversions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from fractions import Fraction

from vgpu.api.quantity import (
    MAX_CPU_MILLI,
    mib_ceil,
    mib_floor,
    milli_ceil,
    milli_floor,
    parse_quantity,
    whole_count,
)
from vgpu.core.errors import InvalidRequest
from vgpu.extender.cache import ClusterCache
from vgpu.extender.httpwire import HttpError, read_body, read_head
from vgpu.extender.preemption import parse_preemption_args
from vgpu.extender.wire import BadRequest, NamesMemo, parse_binding_args, parse_extender_args

_loop = asyncio.new_event_loop()
_cache = ClusterCache(key=b"fuzz", memory_unit_mib=256)
_memo = NamesMemo()


async def _read(data: bytes) -> None:
    reader = asyncio.StreamReader(limit=65536)
    reader.feed_data(data)
    reader.feed_eof()
    while first := await reader.readline():
        head = await read_head(first, reader)
        await read_body(head, reader, max_body=1 << 20)
        if head.close:
            return


def http_request(data: bytes) -> None:
    try:
        _loop.run_until_complete(_read(data))
    except (HttpError, asyncio.IncompleteReadError):
        pass
    except ValueError as err:  # StreamReader.readline's own limit (the server maps it to 431)
        assert "limit" in str(err) or "Separator" in str(err), err


def wire(data: bytes) -> None:
    for parse in (
        lambda b: parse_extender_args(b, _memo),
        parse_extender_args,
        parse_binding_args,
        parse_preemption_args,
    ):
        try:
            args = parse(data)
        except BadRequest:
            continue
        pod = getattr(args, "pod", None)
        if isinstance(pod, dict):
            with contextlib.suppress(InvalidRequest):
                _cache.parse(pod)


def quantity(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    values: list[object] = [text]
    with contextlib.suppress(ValueError, RecursionError):
        values.append(json.loads(data))
    for value in values:
        try:
            amount = parse_quantity(value, "f")
        except InvalidRequest as err:
            assert err.field == "f"
            continue
        assert isinstance(amount, Fraction) and abs(amount) < 2**80, (value, amount)
        for convert in (milli_ceil, milli_floor, mib_ceil, mib_floor, whole_count):
            try:
                number = convert(value, "f")
            except InvalidRequest:
                continue
            assert 0 <= number <= MAX_CPU_MILLI * 10, (value, number)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "http_request": http_request,
    "wire": wire,
    "quantity": quantity,
}

SEEDS: dict[str, list[bytes]] = {
    "http_request": [
        b"POST /scheduler/filter HTTP/1.1\r\nContent-Length: 2\r\nHost: x\r\n\r\n{}",
        b"POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"POST /b HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
    ],
    "wire": [
        b'{"Pod":{"metadata":{"name":"p","uid":"u","resourceVersion":"1"},"spec":{"containers":'
        b'[{"name":"c","resources":{"limits":{"vgpu.io/cores":"30","vgpu.io/memory":"4"},'
        b'"requests":{"cpu":"500m","memory":"1Gi"}}}]}},"Nodes":null,"NodeNames":["n1","n2"]}',
        b'{"PodName":"p","PodNamespace":"default","PodUID":"u","Node":"n1"}',
        b'{"Pod":{"metadata":{"name":"p"}},"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"v"}],'
        b'"NumPDBViolations":0}}}',
        b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{"name":"n"}}]}}',
    ],
    "quantity": [b"250m", b"1.5Gi", b"1e3", b"-0.5", b"12345678901234567890", b"3", b"1E"],
}
