"""The web view's memory over many updates: does the server's resident set stay flat?

    python bench/web_view_memory.py [--nodes 200] [--gpus 8] [--minutes 3]
    python bench/web_view_memory.py --kubeconfig DIR/kubeconfigs/admin.yaml [--minutes 15]

Serves the snapshot of `bench/inspect_report.py` plus one waiting pod with `vgpu inspect
--serve --fake-cluster --refresh 1` in its own process, rewrites the file every second with one
pod more or less (so every read is a new generation and the pages are rendered anew), and, like
an open page, asks `/api/status.json` and renders `/`, `/queues` and the waiting pod's page
(where it could go: the placement state of each read, built from the parses kept across reads)
every second. Samples the server's VmRSS every 10 s and prints the first sample after one
minute of warm-up, the last, the peak, and the growth per 1,000 reads past the warm-up.

With `--kubeconfig` it serves a live cluster instead (the test cluster of
`hack/testcluster.sh up DIR`, docs/testing.md): the server reads the API server every second,
and the bench creates a vGPU pod one second and deletes it the next through that kubeconfig
(so the cluster, and the view, change at every other read).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.inspect_report import cluster
from tests.inspect.builders import pod
from tests.web.browser import serving
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.snapshot import dumps

WAITING = "bench/wait"
PAGES = ("/", "/queues")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--kubeconfig", help="a live cluster's (admin) kubeconfig, see above")
    parser.add_argument(
        "--view-kubeconfig", help="the kubeconfig the view reads with (default: --kubeconfig)"
    )
    args = parser.parse_args()
    if args.kubeconfig:
        reader = args.view_kubeconfig or args.kubeconfig
        with serving(None, f"--kubeconfig={reader}") as url:
            samples, tick = _measure(url, args.minutes, _churn(args.kubeconfig))
        _report("the live test cluster", samples, tick, args.minutes)
        return
    base = cluster(args.nodes, args.gpus)
    waiting = pod(WAITING, asks={"main": (50, 0)}, phase="Pending")
    base = dataclasses.replace(base, pods=(*base.pods, waiting))
    extra = pod("bench/extra", node="gpu-node-0000", asks={"main": (10, 0)},
                shares={"main": [(0, 10, 1024)]})  # fmt: skip
    versions = [
        dumps(base, as_json=True, names=DEFAULT_NAMES),
        dumps(dataclasses.replace(base, pods=(*base.pods, extra)), as_json=True,
              names=DEFAULT_NAMES),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_text(versions[0])
        with serving(path) as url:
            samples, tick = _measure(url, args.minutes,
                                     lambda t: path.write_text(versions[t % 2]),
                                     ("/", "/queues", f"/pod?name={WAITING}"))  # fmt: skip
    _report(f"{args.nodes} nodes x {args.gpus} GPUs", samples, tick, args.minutes)


def _measure(
    url: str, minutes: float, change: Callable[[int], object], pages: tuple[str, ...] = PAGES
) -> tuple[list[tuple[float, int]], int]:
    """Each second: `change(tick)`, then the status and `pages`, as an open view asks for them;
    VmRSS every 10 s."""
    samples: list[tuple[float, int]] = []
    generation = 0
    pid = _server_pid()
    started = time.monotonic()
    tick = 0
    while (elapsed := time.monotonic() - started) < minutes * 60:
        change(tick)
        for page in ("/api/status.json", *pages):
            text = urllib.request.urlopen(url + page, timeout=30).read()
            if page == "/api/status.json":
                generation = json.loads(text).get("generation", 0)
        if tick % 10 == 0:
            samples.append((elapsed, rss_kib(pid)))
        tick += 1
        time.sleep(max(0.0, tick - (time.monotonic() - started)))
    print(f"the view's data changed {generation} times (its generation)")
    return samples, tick


def _churn(kubeconfig: str) -> Callable[[int], object]:
    """Create a 10-core vGPU pod on even ticks, delete it on odd ones."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))  # type: ignore[no-untyped-call]
    limits = {"cpu": "200m", "memory": "64Mi", "vgpu.io/cores": "10", "vgpu.io/memory": "4"}
    body: Any = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-soak", "namespace": "default"},
            "spec": {"schedulerName": "vgpu-scheduler", "restartPolicy": "Never",
                     "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.local/vgpu-test:1",
                                     "resources": {"limits": limits}}]}}  # fmt: skip

    def change(tick: int) -> object:
        try:
            if tick % 2 == 0:
                return api.create_namespaced_pod("default", body)
            return api.delete_namespaced_pod("web-soak", "default", grace_period_seconds=0)
        except client.ApiException as err:  # still terminating, or already gone: next tick
            return err.status

    return change


def _report(what: str, samples: list[tuple[float, int]], tick: int, minutes: float) -> None:
    if os.environ.get("VGPU_BENCH_VERBOSE"):
        print(" ".join(f"{t:.0f}s:{k / 1024:.1f}" for t, k in samples))
    warm = [s for s in samples if s[0] >= 60] or samples
    first, last = warm[0], warm[-1]
    per_1000 = (last[1] - first[1]) / max(1.0, (last[0] - first[0])) * 1000
    print(
        f"{what}, {tick} reads in {minutes:.1f} min: RSS after "
        f"warm-up {first[1] / 1024:.1f} MiB, at the end {last[1] / 1024:.1f} MiB, peak "
        f"{max(s[1] for s in samples) / 1024:.1f} MiB; growth {per_1000 / 1024:+.2f} MiB per "
        "1,000 reads"
    )


def _server_pid() -> int:
    """The serving process: this process's child running `--serve`."""
    me = os.getpid()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().split()
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[3]) == me and b"--serve" in cmd:
            return int(proc.name)
    raise RuntimeError("no `vgpu inspect --serve` child process")


if __name__ == "__main__":
    main()
