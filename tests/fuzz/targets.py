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
* `pod`: a pod with values of any shape (chosen by the bytes) at the fields the extender reads,
  through the pod watch handler and the filter and prioritize verbs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

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
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.preemption import parse_preemption_args
from vgpu.extender.server.http1_request import HttpError, read_body, read_head
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


class _Bytes:
    """Reads choices from the fuzzer's bytes (zeros once they run out)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def byte(self) -> int:
        self.at += 1
        return self.data[self.at - 1] if self.at <= len(self.data) else 0

    def text(self) -> str:
        n = self.byte() % 12
        return bytes(self.byte() for _ in range(n)).decode("utf-8", "replace")

    def value(self, depth: int = 0) -> object:
        kind = self.byte() % (9 if depth < 3 else 6)
        if kind == 0:
            return None
        if kind == 1:
            return self.byte() % 2 == 0
        if kind == 2:
            return (self.byte() - 128) * 10 ** (self.byte() % 30)
        if kind == 3:
            return self.text()
        if kind == 4:
            return self.byte() / 7
        if kind == 5:
            return _QUANTITIES[self.byte() % len(_QUANTITIES)]
        if kind in (6, 7):
            return [self.value(depth + 1) for _ in range(self.byte() % 3)]
        return {self.text(): self.value(depth + 1) for _ in range(self.byte() % 3)}


_QUANTITIES = ["250m", "1e5000", "30", "1Gi", "-1", "1.5", "²", "0x1", "100"]
_FIELDS = [
    ("metadata", "annotations"),
    ("metadata", "annotations", "vgpu.io/policy"),
    ("metadata", "annotations", "vgpu.io/gang-size"),
    ("metadata", "annotations", "vgpu.io/gpu-type"),
    ("metadata", "annotations", "vgpu.io/assignment"),
    ("metadata", "annotations", "vgpu.io/admitted"),
    ("metadata", "labels"),
    ("metadata", "name"),
    ("spec", "containers"),
    ("spec", "initContainers"),
    ("spec", "overhead"),
    ("spec", "overhead", "cpu"),
    ("spec", "nodeName"),
    ("status", "phase"),
    ("spec", "containers", 0, "resources"),
    ("spec", "containers", 0, "resources", "limits", "vgpu.io/cores"),
    ("spec", "containers", 0, "resources", "limits", "vgpu.io/memory"),
    ("spec", "containers", 0, "resources", "requests", "cpu"),
    ("spec", "containers", 0, "resources", "requests", "memory"),
]


def _pod_from(source: _Bytes) -> dict[str, object]:
    limits = {"vgpu.io/cores": "30", "vgpu.io/memory": "4"}
    container = {"name": "c", "resources": {"limits": limits, "requests": {"cpu": "1"}}}
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
        "spec": {"containers": [container], "nodeName": "n1" if source.byte() % 2 else ""},
        "status": {"phase": "Pending"},
    }
    for _ in range(1 + source.byte() % 3):
        path = _FIELDS[source.byte() % len(_FIELDS)]
        target: Any = pod
        for step in path[:-1]:
            if isinstance(target, dict):
                target = target.setdefault(step, {})
            elif isinstance(target, list) and isinstance(step, int) and step < len(target):
                target = target[step]
            else:
                break
        else:
            if isinstance(target, dict):
                target[path[-1]] = source.value()
    return pod


_NODE = {
    "metadata": {"name": "n1", "annotations": {}},
    "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}},
}


def pod(data: bytes) -> None:
    """A pod with fuzzed values at the fields the extender reads, through the pod watch and the
    filter and prioritize verbs: no exception, and nothing held once the pod is deleted."""
    from vgpu.extender.config import ExtenderConfig
    from vgpu.extender.service import Extender
    from vgpu.extender.wire import ExtenderArgs

    cache = ClusterCache(key=b"fuzz", memory_unit_mib=256)
    cache.apply_node("ADDED", _NODE)
    obj = _pod_from(_Bytes(data))
    cache.apply_pod("ADDED", obj)
    ext = Extender(cache, config=ExtenderConfig(watch_wait=0))  # the watch has shown what it will
    ext.filter(ExtenderArgs(obj, ["n1"]))
    ext.prioritize(ExtenderArgs(obj, ["n1"]))
    cache.apply_pod("DELETED", obj)
    assert cache.ledger.holdings() == [], obj


TARGETS: dict[str, Callable[[bytes], None]] = {
    "http_request": http_request,
    "wire": wire,
    "quantity": quantity,
    "pod": pod,
}

SEEDS: dict[str, list[bytes]] = {
    "http_request": [
        b"POST /scheduler/filter HTTP/1.1\r\nContent-Length: 2\r\nHost: x\r\n\r\n{}",
        b"POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"POST /b HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
        b"POST /f HTTP/1.1\r\nContent-Length: \xb2\r\n\r\n",  # once a ValueError (atheris)
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
    "pod": [b"", b"\x01\x02\x0f\x05\x01", b"\x00\x03\x08\x08\x01abc\x02\x07\x06"],
}
