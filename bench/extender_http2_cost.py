"""What HTTP/2 costs the extender's HTTP server per request, against HTTP/1.1, both over TLS.

    python bench/extender_http2_cost.py [--rounds 5] [--requests 400]

kube-scheduler's Go client negotiates HTTP/2 with the extender (ALPN "h2") and then needs no
new connection, hence no TLS handshake, while binds are in flight; over HTTP/1.1 it opened one
about every few pods. HTTP/2 framing is done in Python here (the `h2` library), so each request
costs the server more than an HTTP/1.1 one; this prints how much. The extender's `HttpServer`
answers every POST to /filter with a stub (no verb work) replying a body of the request's size;
a client in its own process (as kube-scheduler is) sends bind-, 500-name- and 5,000-name-sized
bodies on one connection, over HTTP/1.1 (`http.client`) or HTTP/2 (the `h2` library, with Go's
default 4 MiB stream window). Printed per size: the server's CPU per request (the process time
of this process, which runs only the server meanwhile) and the client's round-trip p50, medians
over rounds that alternate the two protocols. The client's own cost is in the round trip, not in
the server's CPU.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.extender_bench import _certs
from bench.extender_tls_cost import SIZES, _Stub
from bench.scheduler_standin import client_tls
from tests.extender.h2client import H2Client, tls_socket
from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.tls import TlsFiles, server_context

PROTOCOLS = ("HTTP/1.1", "HTTP/2")
GO_STREAM_WINDOW = 4 << 20
"""golang.org/x/net/http2 transport.go: transportDefaultStreamFlow."""


def _client(conn: Any, port: int, certs: str, protocol: str, size: int, requests: int) -> None:
    """Process entry: the round-trip p50 of `requests` bodies of `size` bytes."""
    body = b"{" + b"a" * (size - 2) + b"}"
    if protocol == "HTTP/2":
        h2 = H2Client(tls_socket(port, Path(certs), Path(certs), ["h2"]), window=GO_STREAM_WINDOW)

        def once() -> None:
            h2.wait(h2.request("POST", "/scheduler/filter", body))
    else:
        h1 = http.client.HTTPSConnection("localhost", port, timeout=30, context=client_tls(certs))

        def once() -> None:
            h1.request("POST", "/scheduler/filter", body)
            h1.getresponse().read()

    for _ in range(20):  # connected and warm before the server's CPU is counted
        once()
    conn.send("ready")
    conn.recv()
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    conn.send(statistics.median(times))


def _one(port: int, certs: str, protocol: str, size: int, requests: int) -> tuple[float, float]:
    """(server CPU per request, round-trip p50), in seconds."""
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    child = spawn.Process(target=_client, args=(theirs, port, certs, protocol, size, requests))
    child.start()
    ours.recv()
    cpu = time.process_time()
    ours.send("go")
    p50 = float(ours.recv())
    cpu = time.process_time() - cpu
    child.join()
    return cpu / requests, p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    certs = _certs(False)
    files = TlsFiles(f"{certs}/extender.crt", f"{certs}/extender.key", f"{certs}/client-ca.crt")
    server = HttpServer(_Stub(), host="127.0.0.1", tls=server_context(files))  # type: ignore[arg-type]
    server.start()
    found: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for name, size in SIZES.items():
            for protocol in PROTOCOLS:
                one = _one(server.port, certs, protocol, size, args.requests)
                found.setdefault((name, protocol), []).append(one)
    server.stop()
    print(f"extender HTTP server over TLS, stub verbs, {args.rounds} rounds x {args.requests}:")
    for name in SIZES:
        line = f"  {name:26s}"
        for protocol in PROTOCOLS:
            cpu = statistics.median(c for c, _ in found[(name, protocol)]) * 1000
            p50 = statistics.median(p for _, p in found[(name, protocol)]) * 1000
            line += f"  {protocol}: server CPU {cpu:.3f} ms, round trip {p50:.3f} ms"
        print(line)


if __name__ == "__main__":
    main()
