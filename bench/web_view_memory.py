"""The web view's memory over many updates: does the server's resident set stay flat?

    python bench/web_view_memory.py [--nodes 200] [--gpus 8] [--minutes 3]

Serves the snapshot of `bench/inspect_report.py` with `vgpu inspect --serve --fake-cluster
--refresh 1` in its own process, rewrites the file every second with one pod more or less (so
every read is a new generation and the pages are rendered anew), and, like an open page, asks
`/api/status.json` and renders `/` and `/queues` every second. Samples the server's VmRSS every
10 s and prints the first sample after one minute of warm-up, the last, the peak, and the
growth per 1,000 reads past the warm-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.inspect_report import cluster
from tests.inspect.builders import pod
from tests.web.browser import serving
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.snapshot import dumps


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
    args = parser.parse_args()
    base = cluster(args.nodes, args.gpus)
    extra = pod("bench/extra", node="gpu-node-0000", asks={"main": (10, 0)},
                shares={"main": [(0, 10, 1024)]})  # fmt: skip
    versions = [
        dumps(base, as_json=True, names=DEFAULT_NAMES),
        dumps(dataclasses.replace(base, pods=(*base.pods, extra)), as_json=True,
              names=DEFAULT_NAMES),
    ]  # fmt: skip
    samples: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_text(versions[0])
        with serving(path) as url:
            pid = _server_pid()
            started = time.monotonic()
            tick = 0
            while (elapsed := time.monotonic() - started) < args.minutes * 60:
                path.write_text(versions[tick % 2])
                for page in ("/api/status.json", "/", "/queues"):
                    urllib.request.urlopen(url + page, timeout=30).read()
                if tick % 10 == 0:
                    samples.append((elapsed, rss_kib(pid)))
                tick += 1
                time.sleep(max(0.0, tick - (time.monotonic() - started)))
    if os.environ.get("VGPU_BENCH_VERBOSE"):
        print(" ".join(f"{t:.0f}s:{k / 1024:.1f}" for t, k in samples))
    warm = [s for s in samples if s[0] >= 60] or samples
    first, last = warm[0], warm[-1]
    per_1000 = (last[1] - first[1]) / max(1.0, (last[0] - first[0])) * 1000
    print(
        f"{args.nodes} nodes x {args.gpus} GPUs, {tick} reads in {args.minutes:.1f} min: RSS after "
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
