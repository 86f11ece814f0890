"""Cores under contention: each busy container's share of one GPU, and the GPU's idle time.

Two to three containers with guarantees that fill the GPU spin 2 ms kernels (the isolation
tier's `cuload`) in bubblewrap containers over the stand-in driver, whose GPU time-slices
between processes (tests/isolation/standin/timeline.c: a kernel's events also time the other
processes' turns, as on a GPU without MPS). The node agent's elastic duty runs beside them, once
without its NVML outer loop (every scale neutral: the interposer's events alone, as before the
outer loop existed) and once with it. Each share is a container's busy time on the GPU's timeline
(its processes' together) over a window after the loop has settled; medians of --runs. The last
rows put one container beside a neighbour launching on one stream: `s8`/`s4` launch on several
streams at once (cuload's `streams8`: round robin over eight; `streams`: four), `g` launches a
CUDA graph (as PyTorch and vLLM run once captured), `p2` is two processes each launching kernels:

    python bench/contention.py [--runs 3] [--settle 4] [--window 3] [--correct 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.isolation.conftest import Build, Cluster, _build
from tests.isolation.test_cores_share import KERNEL_US, container_rates, elastic_agent

ONE = "kernel"
SPLITS: list[tuple[tuple[int, ...], tuple[str, ...]]] = [
    ((30, 70), (ONE, ONE)),
    ((50, 50), (ONE, ONE)),
    ((10, 90), (ONE, ONE)),
    ((20, 30, 50), (ONE, ONE, ONE)),
    ((50, 50), ("streams8", ONE)),
    ((30, 70), ("streams", ONE)),
    ((30, 70), ("graph", ONE)),
    ((30, 70), ("two", ONE)),
]
# the row's label for each mode; "two": two processes of the container, each launching kernels
STREAMS = {ONE: "", "streams": "s4", "streams8": "s8", "graph": "g", "two": "p2"}


def measure(
    build: Build,
    root: Path,
    split: tuple[int, ...],
    modes: tuple[str, ...],
    correct: str,
    settle: float,
    window: float,
) -> tuple[list[float], float]:
    """Each container's share (percent of the GPU) and the idle percent, over `window` s."""
    cluster = Cluster(build, 1, Path(tempfile.mkdtemp(dir=root)))
    containers = [cluster.admit([(0, cores, 256)]) for cores in split]
    seconds = str(settle + window + 1)
    owners = [i for i, m in enumerate(modes) for _ in range(2 if m == "two" else 1)]
    argvs = [
        [str(cluster.build.cuload), "spin", "0", seconds, KERNEL_US, ONE if m == "two" else m]
        for m in (modes[i] for i in owners)
    ]
    with elastic_agent(cluster, correct):
        runs = [cluster.sandbox.popen(containers[i], a) for i, a in zip(owners, argvs, strict=True)]
        try:
            pids = [int(r.stdout.readline().split()[1]) for r in runs if r.stdout is not None]
            time.sleep(settle)
            return container_rates(cluster, pids, owners, window)
        finally:
            for r in runs:
                r.kill()
                r.communicate(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=4.0)
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--correct", default="0.5", help="the outer loop's period, seconds")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="vgpu-contention-"))
    build = _build(root / "build")
    print("split      | loop | shares (guarantee)          | worst shortfall | idle")
    for split, modes in SPLITS:
        for name, correct in (("off", "off"), ("on", args.correct)):
            got = [
                measure(build, root, split, modes, correct, args.settle, args.window)
                for _ in range(args.runs)
            ]
            shares = [statistics.median(r[0][i] for r in got) for i in range(len(split))]
            idle = statistics.median(r[1] for r in got)
            short = max(g - s for g, s in zip(split, shares, strict=True))
            text = " ".join(f"{s:5.1f} ({g})" for s, g in zip(shares, split, strict=True))
            label = "/".join(f"{g}{STREAMS[m]}" for g, m in zip(split, modes, strict=True))
            print(f"{label:10} | {name:4} | {text:27} | {short:+14.1f}  | {idle:4.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
