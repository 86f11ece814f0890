"""The web view's pod page after each read: 1,000 nodes x 8 GPUs, a waiting pod's "could go".

    python bench/web_view_pod.py [--nodes 1000] [--gpus 8] [--reads 7]

Serves the snapshot of `bench/inspect_report.py` plus one waiting pod (50 cores, room for it
on one GPU of the last node) with `vgpu inspect --serve --fake-cluster` (a read every 5 s) in its own
process. Each round rewrites the file with one other pod more or less (so the read is a new
generation, as on a live cluster where a few pods change between reads), waits until the
view has read it, then times `/pod?name=bench/wait` twice: the first page after the read
builds the placement state of that read (`vgpu/inspect/web/where.py`), the second reuses it.
Prints the medians over `--reads` rounds and the page's weight. Target: the first page under
1 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
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

WAITING = "bench/wait"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--reads", type=int, default=7)
    args = parser.parse_args()
    base = cluster(args.nodes, args.gpus)
    freed = f"job-{args.nodes - 1}-0-0"  # 50 cores free on the last node's GPU 0
    pods = [p for p in base.pods if p["metadata"]["name"] != freed]
    pods.append(pod(WAITING, asks={"main": (50, 0)}, phase="Pending"))
    extra = pod("bench/extra", asks={"main": (10, 0)}, phase="Pending")
    versions = [
        dumps(dataclasses.replace(base, pods=tuple(pods)), as_json=True, names=DEFAULT_NAMES),
        dumps(dataclasses.replace(base, pods=(*pods, extra)), as_json=True, names=DEFAULT_NAMES),
    ]
    first, second = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_text(versions[0])
        with serving(path, "--refresh", "5") as url:  # the command's default
            _read_since(url, 0)
            weight = len(_get(url + f"/pod?name={WAITING}"))
            for n in range(args.reads):
                generation = _generation(url)
                path.write_text(versions[(n + 1) % 2])
                _read_since(url, generation)
                first.append(_timed(url + f"/pod?name={WAITING}"))
                second.append(_timed(url + f"/pod?name={WAITING}"))
    print(
        f"{args.nodes} nodes x {args.gpus} GPUs, {len(pods)} pods: the pod page of a waiting "
        f"pod, first after a read {statistics.median(first) * 1000:.0f} ms (max "
        f"{max(first) * 1000:.0f}), then {statistics.median(second) * 1000:.0f} ms; "
        f"{weight / 1024:.1f} KiB (median of {args.reads} reads)"
    )


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as answer:
        body: bytes = answer.read()
    return body


def _timed(url: str) -> float:
    started = time.perf_counter()
    page = _get(url)
    assert b"Where it could go now" in page, "no placement on the pod page"
    return time.perf_counter() - started


def _generation(url: str) -> int:
    return int(json.loads(_get(url + "/api/status.json"))["generation"])


def _read_since(url: str, generation: int) -> None:
    """Until the view has read a new generation (the server offers no event to wait on)."""
    deadline = time.monotonic() + 120
    while _generation(url) <= generation:
        if time.monotonic() > deadline:
            raise SystemExit("the view did not read the new snapshot within 120 s")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
