"""kube-scheduler's side of the extender protocol for the extender benchmark, in its own process.

In a cluster kube-scheduler is a separate (Go) process: its JSON work does not compete with the
extender's for the GIL, so the stand-in runs in a process of its own and stays lean (orjson, the
node names encoded once, HTTP written and read by hand). Like kube-scheduler it breaks ties
between the best-scoring nodes at random (a host the prioritize reply leaves out scores 0). It
times each verb's round trip.

Two binding modes:

* `sequential`: filter, prioritize, bind, then the next pod (a lower bound);
* `async`: as kube-scheduler does it, the binding cycle runs beside the next pods' scheduling
  cycles (a goroutine per pod there, a small thread pool here, each thread with its own
  keep-alive connection), so a bind's round trip to the API server overlaps the next filter.
"""

from __future__ import annotations

import random
import socket
import ssl
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from operator import itemgetter
from typing import Any

import orjson

Obj = dict[str, Any]
BINDERS = 8
"""Binding cycles in flight at most (kube-scheduler has no fixed bound; a few suffice here)."""


def client_tls(certs: str) -> ssl.SSLContext:
    """kube-scheduler's TLS: trust the extender's CA, present the client certificate (files of
    hack/make-extender-certs.sh in the directory `certs`)."""
    context = ssl.create_default_context(cafile=f"{certs}/server-ca.crt")
    context.load_cert_chain(f"{certs}/scheduler.crt", f"{certs}/scheduler.key")
    return context


class _Wire:
    """One keep-alive HTTP/1.1 connection, written and read by hand (http.client's header
    parsing would be most of the stand-in's own cost; Go's client costs far less)."""

    def __init__(self, port: int, certs: str | None = None) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = (
            client_tls(certs).wrap_socket(sock, server_hostname="localhost") if certs else sock
        )
        self.stream = self.sock.makefile("rb")

    def post(self, verb: str, body: bytes) -> tuple[float, Any]:
        start = time.perf_counter()
        head = f"POST /scheduler/{verb} HTTP/1.1\r\nHost: extender\r\n"
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        self.sock.sendall(head.encode() + body)
        status = self.stream.readline()
        length = 0
        while (line := self.stream.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        reply = self.stream.read(length)
        elapsed = time.perf_counter() - start
        if status.split()[1:2] != [b"200"]:
            raise RuntimeError(f"{verb}: {status!r}: {reply[:200]!r}")
        return elapsed, orjson.loads(reply)


class StandIn:
    """Schedules pods one after another through filter, prioritize and bind."""

    def __init__(self, port: int, names: list[str], mode: str, certs: str | None = None) -> None:
        self.port, self.mode, self.certs = port, mode, certs
        self.names, self.names_json = names, orjson.dumps(names)
        self.wire = _Wire(port, certs)
        self.times: dict[str, list[float]] = {"filter": [], "prioritize": [], "bind": []}
        self._local = threading.local()
        self._lock = threading.Lock()
        self.rng = random.Random(42)

    def _record(self, verb: str, elapsed: float) -> None:
        with self._lock:
            self.times[verb].append(elapsed)

    def cycle(self, pod: Obj) -> str | Obj:
        """The scheduling cycle: the bind request to send, or why the pod fits nowhere."""
        head = b'{"Pod":' + orjson.dumps(pod) + b',"Nodes":null,"NodeNames":'
        took, result = self.wire.post("filter", head + self.names_json + b"}")
        self._record("filter", took)
        feasible = result["NodeNames"]
        if result["Error"] or not feasible:
            return str(result["Error"] or "no node fits")
        best = feasible[0]
        if len(feasible) > 1:
            names = self.names_json if feasible == self.names else orjson.dumps(feasible)
            took, scores = self.wire.post("prioritize", head + names + b"}")
            self._record("prioritize", took)
            top = max(map(itemgetter("Score"), scores), default=0)
            best = self.rng.choice([h["Host"] for h in scores if h["Score"] == top] or feasible)
        meta = pod["metadata"]
        return {
            "PodName": meta["name"],
            "PodNamespace": meta["namespace"],
            "PodUID": meta["uid"],
            "Node": best,
        }

    def bind(self, args: Obj) -> str:
        """The binding cycle: "" when bound, else the extender's error."""
        wire = getattr(self._local, "wire", None)
        if wire is None:
            wire = self._local.wire = _Wire(self.port, self.certs)
        took, result = wire.post("bind", orjson.dumps(args))
        self._record("bind", took)
        return str(result["Error"])

    def run(self, pods: list[Obj]) -> tuple[float, list[str]]:
        """Schedule every pod; (seconds until the last bind returned, errors with "" = bound)."""
        start = time.perf_counter()
        outcomes: list[str | Future[str]] = []
        with ThreadPoolExecutor(BINDERS) as pool:
            for pod in pods:
                args = self.cycle(pod)
                if isinstance(args, str):
                    outcomes.append(args)
                elif self.mode == "async":
                    outcomes.append(pool.submit(self.bind, args))
                else:
                    outcomes.append(self.bind(args))
            errors = [o.result() if isinstance(o, Future) else o for o in outcomes]
        return time.perf_counter() - start, errors


def serve(conn: Connection, port: int, certs: str | None = None) -> None:
    """Process entry: run each (names, pods, mode) job sent, answer with the figures; over
    HTTPS with the client certificate in `certs` when given."""
    while True:
        job = conn.recv()
        if job is None:
            return
        names, pods, mode = job
        stand_in = StandIn(port, names, mode, certs)
        elapsed, errors = stand_in.run(pods)
        conn.send((elapsed, errors, stand_in.times))
