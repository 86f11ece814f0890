"""What TLS adds per request to the extender's HTTP server, apart from the verbs' own work.

    python bench/extender_tls_cost.py [--rounds 7] [--requests 300]

The extender's `HttpServer` answers every POST with a fixed reply from a stub (no verb work), over
plain HTTP and over HTTPS with client certificates (hack/make-extender-certs.sh), once with its
ECDSA P-256 keys and once with RSA-2048 ones (`--rsa`); a client on one keep-alive connection, in a process of its own (as kube-scheduler is), sends
bodies the size of a bind (0.1 KB), a filter with 500 names (8 KB) and with 5,000 names
(75 KB), and gets a reply of the same size back. Rounds alternate the three servers so that load
from other jobs hits them alike; the figures are medians over rounds of each round's p50. Also
printed: a new connection's first request (TCP + TLS handshake with both certificates), which
kube-scheduler pays often: it resumes no TLS session and keeps at most 2 idle connections to an
extender (pkg/scheduler/extender.go, Go's default MaxIdleConnsPerHost).
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
from bench.scheduler_standin import client_tls
from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.tls import TlsFiles, server_context

SIZES = {"bind 0.1 KB": 100, "filter 500 names 8 KB": 8_000, "filter 5,000 names 75 KB": 75_000}


class _Stub:
    """Routes that answer at once with a body of the request's size."""

    def __init__(self) -> None:
        self.metrics = self

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        return 200, b"x" * len(body)

    def ready(self) -> str | None:
        return None

    def exposition(self) -> bytes:
        return b""


def _connect(port: int, certs: str | None) -> http.client.HTTPConnection:
    if certs is None:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    return http.client.HTTPSConnection("localhost", port, timeout=30, context=client_tls(certs))


def _round_trip(conn: http.client.HTTPConnection, body: bytes) -> float:
    start = time.perf_counter()
    conn.request("POST", "/scheduler/filter", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    return time.perf_counter() - start


def _client(conn: Any, port: int, certs: str | None, requests: int) -> None:
    """Process entry: p50 per body size, then the first request of fresh connections."""
    keep = _connect(port, certs)
    out = {}
    for name, size in SIZES.items():
        body = b"{" + b"a" * (size - 2) + b"}"
        times = sorted(_round_trip(keep, body) for _ in range(requests))
        out[name] = times[len(times) // 2]
    fresh = []
    for _ in range(20):
        c = _connect(port, certs)
        fresh.append(_round_trip(c, b"{}"))
        c.close()
    out["new connection + first request"] = sorted(fresh)[len(fresh) // 2]
    conn.send(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    # the stub stands in for the extender's Routes (duck-typed: post, ready, metrics)
    servers: dict[str, tuple[HttpServer, str | None]] = {
        "plain": (HttpServer(_Stub(), host="127.0.0.1"), None)  # type: ignore[arg-type]
    }
    for mode, rsa in (("TLS P-256", False), ("TLS RSA-2048", True)):
        certs = _certs(rsa)
        files = TlsFiles(f"{certs}/extender.crt", f"{certs}/extender.key", f"{certs}/client-ca.crt")
        tls = server_context(files)
        servers[mode] = (HttpServer(_Stub(), host="127.0.0.1", tls=tls), certs)  # type: ignore[arg-type]
    for server, _ in servers.values():
        server.start()
    spawn = multiprocessing.get_context("spawn")
    results: dict[str, dict[str, list[float]]] = {m: {} for m in servers}
    for _ in range(args.rounds):
        for mode, (server, mine) in servers.items():
            ours, theirs = spawn.Pipe()
            child = spawn.Process(target=_client, args=(theirs, server.port, mine, args.requests))
            child.start()
            for name, value in ours.recv().items():
                results[mode].setdefault(name, []).append(value)
            child.join()
    print(f"extender HTTP server, stub verbs, {args.rounds} rounds x {args.requests} requests:")
    for name in results["plain"]:
        plain = statistics.median(results["plain"][name]) * 1000
        line = f"  {name:32s} plain {plain:6.3f} ms"
        for mode in ("TLS P-256", "TLS RSA-2048"):
            took = statistics.median(results[mode][name]) * 1000
            line += f"  {mode} {took:6.3f} ms (+{took - plain:.3f})"
        print(line)
    for server, _ in servers.values():
        server.stop()


if __name__ == "__main__":
    main()
