"""How long a gang takes to bind: a real extender over HTTP, kube-scheduler's retries simulated.

    python bench/gang_bind.py [--admit-s 1.0] [--gang-timeout 60]

Two gangs of 8 members, each against the real `vgpu extender` daemon (fake API server, real
HTTP), with a kube-scheduler stand-in that runs filter, prioritize and bind for every unbound
member and, after a failed attempt, retries that member after kube-scheduler's per-pod backoff
(podInitialBackoffSeconds 1 s, doubling, podMaxBackoffSeconds 10 s). A stand-in node agent
marks a bound pod admitted `--admit-s` after its bind. Time is simulated (the extender's clock
is the simulation's), so the figures are seconds of cluster time, not of this machine:

* 8 x 8-GPU: 8 members asking 8 whole GPUs each, on 8 nodes x 8 GPUs (one member per node);
* 8 x 1-GPU on one node: 8 members asking one whole GPU each, on one 8-GPU node; invariant I
  binds them one after another, each after the previous one is admitted.

Prints, per gang: seconds from the first filter to the last bind, filter/bind calls, and
whether every member kept its place (the gang timeout no longer releases a started gang).
"""

from __future__ import annotations

import argparse
import heapq
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.extender.builders import FakeClock, Wire, make_node, make_pod
from tests.kubeapi.server import FakeApiServer
from vgpu.adapters.kube.calls import KubeApi
from vgpu.daemons.extender.daemon import DaemonConfig, ExtenderDaemon
from vgpu.extender.config import ExtenderConfig

KEY = b"gang-bench-key"
BACKOFF_START, BACKOFF_MAX = 1.0, 10.0


def run(nodes: int, gpus: int, members: int, cores: int, admit_s: float, timeout: float) -> str:
    server = FakeApiServer().start()
    client = server.api_client()
    clock = FakeClock()
    config = DaemonConfig(
        key=KEY,
        extender=ExtenderConfig(gang_timeout=timeout, bind_wait=0.05),
        host="127.0.0.1",
        port=0,
        watch_timeout=30,
        sweep_interval=3600,
        retry_delay=0.05,
    )
    names = [f"n{i}" for i in range(nodes)]
    for name in names:
        server.store.put(make_node(name, gpus=gpus))
    pods = [f"job-{i}" for i in range(members)]
    notes = {"vgpu.io/gang-name": "job", "vgpu.io/gang-size": str(members)}
    for name in pods:
        server.store.put(make_pod(name, cores=cores, annotations=dict(notes)))
    daemon = ExtenderDaemon(KubeApi(client, request_timeout=5), config, clock=clock)
    daemon.start()
    try:
        assert daemon.wait_ready(10), daemon.why_not_ready()
        wire = Wire(daemon.port)
        start, calls = clock.now, 0
        events = [(start, 0, "try", name) for name in pods]
        failures = dict.fromkeys(pods, 0)
        bound: set[str] = set()
        heapq.heapify(events)
        seq = 1
        while len(bound) < members:
            at, _, what, name = heapq.heappop(events)
            clock.now = at
            daemon.extender.sweep()
            pod = server.store.get("Pod", "default", name)
            assert pod is not None
            if what == "admit":
                pod["metadata"]["annotations"]["vgpu.io/admitted"] = json.dumps(["main"])
                server.store.put(pod)
                _settle(daemon, f"default/{name}")
                continue
            calls += 1
            node, _result = wire.schedule(pod, names)
            if node is None:
                failures[name] += 1
                delay = min(BACKOFF_MAX, BACKOFF_START * 2 ** (failures[name] - 1))
                heapq.heappush(events, (at + delay, seq, "try", name))
            else:
                bound.add(name)
                heapq.heappush(events, (at + admit_s, seq, "admit", name))
            seq += 1
        took = clock.now - start
        clock.now += timeout + 1
        daemon.extender.sweep()
        kept = all(daemon.cache.ledger.holding(f"default/{p}") is not None for p in pods)  # type: ignore[arg-type]
        return (
            f"{members} x {cores // 100}-GPU on {nodes} node(s) x {gpus} GPUs: all bound after "
            f"{took:.1f} s (cluster time), {calls} scheduling cycles, every place kept: {kept}"
        )
    finally:
        daemon.stop()
        client.close()
        server.stop()


def _settle(daemon: ExtenderDaemon, key: str) -> None:
    """Wait (real time) until the extender's watch has seen the admission."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with daemon.cache.atomic():
            if all(key not in pods for pods in daemon.cache.pending.values()):
                return
        time.sleep(0.005)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admit-s", type=float, default=1.0)
    parser.add_argument("--gang-timeout", type=float, default=60.0)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    wall = time.perf_counter()
    print(run(8, 8, 8, 800, args.admit_s, args.gang_timeout))
    print(run(1, 8, 8, 100, args.admit_s, args.gang_timeout))
    print(f"(wall time {time.perf_counter() - wall:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
