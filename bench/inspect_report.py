"""`kubectl inspect vgpu` on a large cluster: 1,000 nodes x 8 GPUs from a saved JSON snapshot.

    python bench/inspect_report.py [--nodes 1000] [--gpus 8] [--repeat 3] [--yaml]

Builds the snapshot with the test builders (real inventory annotations, signed assignments: 8
pods per node, some sharing a GPU, some spanning two, one pending), saves it as the CLI's
`--save-snapshot` would, then times the `--fake-cluster FILE` command in this process (read,
parse, build, render; output discarded), its parts, and the whole console script in a fresh
interpreter ("process": imports included; "process CPU": the CPU seconds it used, steadier than
wall time on a shared machine). Prints the median of `--repeat` runs.
Target: under 1 s for 1,000 x 8 from JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.inspect.builders import node, pod
from vgpu.inspect.build import build_report
from vgpu.inspect.cli import main, render
from vgpu.inspect.snapshot import Snapshot, dumps, loads

A100 = ("NVIDIA A100-SXM4-80GB", 81920)


def cluster(nodes: int, gpus: int) -> Snapshot:
    """`nodes` nodes of `gpus` A100s; per node pods filling about two thirds of the GPUs."""
    node_objs, pods = [], []
    for n in range(nodes):
        name = f"gpu-node-{n:04d}"
        node_objs.append(node(name, [A100] * gpus, ip=f"10.{n // 250}.{n % 250}.1"))
        for g in range(0, gpus - 2, 2):
            for half in range(2):
                pods.append(
                    pod(
                        f"team-{n % 7}/job-{n}-{g}-{half}",
                        node=name,
                        asks={"main": (50, 80)},
                        shares={"main": [(g + half, 50, 40960)]},
                    )
                )
        pods.append(
            pod(
                f"train/big-{n}",
                node=name,
                asks={"main": (200, 0)},
                shares={"main": [(gpus - 2, 100, 81920), (gpus - 1, 100, 81920)]},
                phase="Pending",
            )
        )
    return Snapshot(tuple(node_objs), tuple(pods), (), "2025-01-01T12:00:00Z")


def timed(run: object) -> float:
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        run()  # type: ignore[operator]
    return time.perf_counter() - started


def process(path: Path) -> float:
    """The console script as a user runs it (a fresh interpreter, imports included); returns the
    CPU seconds it used, which other jobs on a shared machine inflate far less than wall time."""
    command = [sys.executable, "-m", "vgpu.inspect.cli", "--fake-cluster", str(path)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--yaml", action="store_true", help="save and read YAML instead of JSON")
    args = parser.parse_args()
    snapshot = cluster(args.nodes, args.gpus)
    suffix = ".yaml" if args.yaml else ".json"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"snapshot{suffix}"
        path.write_text(dumps(snapshot, as_json=not args.yaml))
        size = path.stat().st_size / 1e6
        text = path.read_text()
        loaded = loads(text)
        report = build_report(loaded)
        parts = {
            "parse": statistics.median(timed(lambda: loads(text)) for _ in range(args.repeat)),
            "build": statistics.median(
                timed(lambda: build_report(loaded)) for _ in range(args.repeat)
            ),
            "render": statistics.median(timed(lambda: render(report)) for _ in range(args.repeat)),
            "command": statistics.median(
                timed(lambda: main(["--fake-cluster", str(path)])) for _ in range(args.repeat)
            ),
        }
        cpu: list[float] = []
        parts["process"] = statistics.median(
            timed(lambda: cpu.append(process(path))) for _ in range(args.repeat)
        )
        parts["process CPU"] = statistics.median(cpu)
    print(
        f"{args.nodes} nodes x {args.gpus} GPUs, {len(snapshot.pods)} pods, "
        f"{suffix[1:].upper()} {size:.1f} MB: "
        + ", ".join(f"{k} {v:.3f} s" for k, v in parts.items())
        + f" (median of {args.repeat})"
    )


if __name__ == "__main__":
    main_bench()
