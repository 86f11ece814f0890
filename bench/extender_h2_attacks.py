"""The filter's latency while HTTP/2 clients attack the extender (docs/threat-model.md: slow
or numerous clients).

    python bench/extender_h2_attacks.py [--nodes 500] [--seconds 8] [--attackers 2] [--pin]

The extender daemon runs in this process over TLS, with its probe port; the fake API server,
a well-behaved kube-scheduler stand-in and the attackers each run in processes of their own (as
in a cluster, so that their work does not compete with the extender's for the GIL). The stand-in
sends one filter after another (the node names of the whole cluster, a pod from the API server)
on one verified HTTP/2 connection, and probes /readyz every 0.5 s on the probe port (plain
HTTP) and on the main port (HTTPS, no certificate, as the kubelet used to). Each attack runs
`--seconds` with `--attackers` processes, after a quiet baseline:

* hold: 64 connections without a certificate, each sending a PING every 5 s (reconnecting);
* reset-anon: no certificate, HEADERS `GET /metrics` + RST_STREAM, 1,000 per write;
* ping-anon / ping / settings: 3,000 PINGs (or SETTINGS) per write, replies never read, without
  and with the scheduler's certificate;
* rapid-reset: with the certificate, bind opened and reset, 1,000 per write;
* zero-window: with the certificate and a window of 0, 60 filters of every node name per
  connection, nothing read.

With `--pin` (Linux) the extender and the stand-in run on the first CPU this process may use,
the attackers and the fake API server on the second: real attackers run on other machines, so
what is measured is the extender's own cost of each attack, not the attackers' TLS and framing
sharing its core. The stand-in shares the extender's CPU as kube-scheduler's own work would.

Printed per phase: filter answers, p50/p99 (target p99 <= 50 ms), probe answers on each port,
the extender's RSS at the end and its peak (limit 512 MiB), the refusals counted by reason, the
extender's CPU time over the phase (100 %: one core's worth), the serving loop's CPU between two
turns of a 5 ms tick (p99 and max: what a filter may wait behind, whatever the machine's load)
and the machine's load average. A
phase starts once every attacker process has started (a spawned process imports for seconds;
before, short phases ended before their attackers began).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import multiprocessing
import os
import ssl
import sys
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event, Semaphore
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.extender_bench import _certs, _client, _pct
from tests.extender.builders import make_node, make_pod
from tests.extender.h2client import H2Client, tls_socket
from tests.kubeapi.server import FakeApiServer
from vgpu.adapters.kube.calls import KubeApi
from vgpu.daemons.extender.daemon import DaemonConfig, ExtenderDaemon
from vgpu.extender.server.tls import TlsFiles

ATTACKS = ("hold", "reset-anon", "ping-anon", "ping", "settings", "rapid-reset", "zero-window")
HEAD = [(b":scheme", b"https"), (b":authority", b"x")]


def _pin(cpu: int | None) -> None:
    """Run this process on `cpu` alone (None: wherever the system schedules it)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _cpus(pin: bool) -> tuple[int | None, int | None]:
    """(the extender's and stand-in's CPU, the attackers' and API server's), or (None, None)."""
    if not pin:
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs two CPUs")
    return cpus[0], cpus[1]


def _api_server(conn: Connection, nodes: int, cpu: int | None) -> None:
    _pin(cpu)
    with FakeApiServer() as server:
        names = [f"node-{i:05d}" for i in range(nodes)]
        for name in names:
            server.store.put(make_node(name, gpus=8))
        pod = server.store.put(make_pod("pending", cores=25))
        conn.send((server.url, names, pod))
        conn.recv()


def _h2(port: int, certs: str, verified: bool, window: int = 65535) -> H2Client:
    sock = tls_socket(port, Path(certs), Path(certs) if verified else None, ["h2"])
    return H2Client(sock, window=window)


def _standin(conn: Connection, port: int, probe_port: int, certs: str, body: bytes, cpu: int | None) -> None:  # fmt: skip
    """Filters back to back and probes every 0.5 s until told to stop; sends the figures."""
    _pin(cpu)
    stop = threading.Event()
    probes = {"probe-port": [0, 0], "main-port": [0, 0]}

    def probe() -> None:
        anon = ssl.create_default_context(cafile=f"{certs}/server-ca.crt")
        while not stop.wait(0.5):
            for where in probes:
                probes[where][1] += 1
                with contextlib.suppress(OSError, http.client.HTTPException):
                    c = (
                        http.client.HTTPConnection("127.0.0.1", probe_port, timeout=3)
                        if where == "probe-port"
                        else http.client.HTTPSConnection("localhost", port, timeout=3, context=anon)
                    )
                    c.request("GET", "/readyz")
                    probes[where][0] += c.getresponse().status == 200
                    c.close()

    threading.Thread(target=probe, daemon=True).start()
    while True:
        if conn.recv() is None:
            return
        samples: list[float] = []
        errors = 0
        client = _h2(port, certs, True)
        deadline = time.monotonic() + conn.recv()
        for counts in probes.values():
            counts[:] = [0, 0]
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            try:
                (reply,) = client.wait(client.request("POST", "/scheduler/filter", body))
                assert reply.status == 200
                samples.append(time.perf_counter() - t0)
            except (OSError, AssertionError, KeyError, ssl.SSLError):
                errors += 1
                with contextlib.suppress(OSError):
                    client = _h2(port, certs, True)
        client.close()
        conn.send((samples, errors, {k: tuple(v) for k, v in probes.items()}))


def _attack(kind: str, port: int, certs: str, body: bytes, stop: Event, ready: Semaphore, cpu: int | None) -> None:  # fmt: skip
    """One attacker process: say it is ready (its imports take seconds), then repeat the attack
    until `stop`."""
    _pin(cpu)
    ready.release()
    held: list[H2Client] = []
    while not stop.is_set():
        try:
            _once(kind, port, certs, body, held)
        except (OSError, ssl.SSLError, AssertionError, Exception):
            time.sleep(0.01)


def _once(kind: str, port: int, certs: str, body: bytes, held: list[H2Client]) -> None:
    if kind == "hold":
        while len(held) < 64:
            held.append(_h2(port, certs, False))
        for client in list(held):
            try:
                client.h2.ping(b"12345678")
                client.flush()
            except OSError:
                held.remove(client)
        time.sleep(5)
        return
    verified = kind in ("ping", "settings", "rapid-reset", "zero-window")
    client = _h2(port, certs, verified, window=0 if kind == "zero-window" else 65535)
    h2 = client.h2
    for i in range(3000 if kind.startswith(("ping", "settings")) else 1000):
        if kind.startswith("ping"):
            h2.ping(i.to_bytes(8, "big"))
        elif kind == "settings":
            h2.update_settings({4: 65535 + i % 2})
        elif kind == "zero-window" and i < 60:
            client.request("POST", "/scheduler/filter", body)
        elif kind in ("reset-anon", "rapid-reset"):
            sid = h2.get_next_available_stream_id()
            if kind == "reset-anon":
                h2.send_headers(sid, [(b":method", b"GET"), *HEAD, (b":path", b"/metrics")], True)
            else:
                h2.send_headers(sid, [(b":method", b"POST"), *HEAD, (b":path", b"/scheduler/bind")])
                h2.send_data(sid, b"{}", end_stream=True)
            h2.reset_stream(sid)
    client.flush()
    client.sock.settimeout(10)
    with contextlib.suppress(OSError, Exception):
        while client.sock.recv(65536):  # read (and answer nothing) until the server closes
            pass
    client.close()


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _LoopHolds:
    """The CPU the extender's serving loop spends between two turns of a 5 ms tick: the longest
    a filter can wait behind other work on that loop. Measured with the loop thread's own CPU
    clock, so it is the extender's cost and not the wait for a busy machine's cores."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self.holds, self._on = loop, list[float](), True
        loop.call_soon_threadsafe(self._tick, None)

    def _tick(self, last: float | None) -> None:
        now = time.thread_time()
        if last is not None:
            self.holds.append(now - last)
        if self._on:
            self._loop.call_later(0.005, self._tick, time.thread_time())

    def stop(self) -> str:
        self._on = False
        holds = sorted(self.holds) or [0.0]
        return f"loop CPU hold p99 {_pct(holds, 0.99):.1f} ms max {holds[-1] * 1000:.1f} ms"


def _phase(name: str, args: Any, daemon: ExtenderDaemon, standin: Connection, body: bytes, certs: str) -> None:  # fmt: skip
    spawn = multiprocessing.get_context("spawn")
    stop, ready = spawn.Event(), spawn.Semaphore(0)
    attackers = [
        spawn.Process(
            target=_attack,
            args=(name, daemon.port, certs, body, stop, ready, args.theirs),
            daemon=True,
        )
        for _ in range(args.attackers if name != "baseline" else 0)
    ]
    for p in attackers:
        p.start()
    for _ in attackers:  # a spawned attacker imports for seconds before it attacks
        assert ready.acquire(timeout=120), "an attacker did not start"
    refused_before = _refused(daemon)
    peak, done = [_rss_mib()], threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            peak.append(_rss_mib())

    threading.Thread(target=sample, daemon=True).start()
    time.sleep(0.5 if attackers else 0)  # the attack under way
    cpu, wall = time.process_time(), time.monotonic()
    holds = _LoopHolds(daemon.http._loop)
    standin.send("go")
    standin.send(args.seconds)
    samples, errors, probes = standin.recv()
    busy = (time.process_time() - cpu) / (time.monotonic() - wall)
    held = holds.stop()
    done.set()
    stop.set()
    for p in attackers:
        p.join(15)
        if p.is_alive():
            p.kill()
    refused = {k: v - refused_before.get(k, 0) for k, v in _refused(daemon).items()}
    refused = {k: int(v) for k, v in refused.items() if v}
    p50, p99 = (_pct(samples, 0.5), _pct(samples, 0.99)) if samples else (0.0, 0.0)
    probe = " ".join(f"{k} {ok}/{n}" for k, (ok, n) in probes.items())
    print(
        f"{name:12s} filters {len(samples):5d} (errors {errors}) p50 {p50:6.1f} ms p99 {p99:7.1f} ms"
        f" | probes {probe} | RSS {_rss_mib():5.0f} MiB peak {max(peak):5.0f} | refused {refused}"
        f" | extender CPU {busy:4.0%} | {held} | load {os.getloadavg()[0]:.1f}"
    )


def _refused(daemon: ExtenderDaemon) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in daemon.metrics.exposition().decode().splitlines():
        if line.startswith("vgpu_extender_refused_requests_total{"):
            reason = line.split('"')[1]
            out[reason] = float(line.rsplit(" ", 1)[1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--attackers", type=int, default=2)
    parser.add_argument("--only", choices=ATTACKS, action="append")
    parser.add_argument("--pin", action="store_true", help="extender and stand-in on one CPU, the attackers on another (Linux)")  # fmt: skip
    args = parser.parse_args()
    args.ours, args.theirs = _cpus(args.pin)
    _pin(args.ours)
    certs = _certs()
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = multiprocessing.Pipe()
    api_proc = spawn.Process(
        target=_api_server, args=(theirs, args.nodes, args.theirs), daemon=True
    )
    api_proc.start()
    url, names, pod = ours.recv()
    api = KubeApi(_client(url), request_timeout=30)
    tls = TlsFiles(f"{certs}/extender.crt", f"{certs}/extender.key", f"{certs}/client-ca.crt")
    daemon = ExtenderDaemon(
        api, DaemonConfig(key=b"bench-key", host="127.0.0.1", port=0, tls=tls, probe_port=0)
    )
    daemon.start()
    assert daemon.wait_ready(120), daemon.why_not_ready()
    body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
    s_ours, s_theirs = multiprocessing.Pipe()
    assert daemon.probe_port is not None
    standin = spawn.Process(
        target=_standin,
        args=(s_theirs, daemon.port, daemon.probe_port, certs, body, args.ours),
        daemon=True,
    )
    standin.start()
    print(
        f"{args.nodes} nodes, filter body {len(body) // 1024} KiB, {args.seconds:.0f} s per phase, "
        f"{args.attackers} attacker process(es); extender RSS {_rss_mib():.0f} MiB; "
        + (
            f"pinned: extender+stand-in CPU {args.ours}, others CPU {args.theirs}"
            if args.pin
            else "not pinned"
        )
    )
    for name in ("baseline", *(args.only or ATTACKS)):
        _phase(name, args, daemon, s_ours, body, certs)
    s_ours.send(None)
    daemon.stop()
    ours.send("stop")


if __name__ == "__main__":
    main()
