"""What vgpu-core adds: per launch, per allocate/free pair, and to a spin kernel's throughput.

Runs the isolation tier's `cuload` program over the stand-in driver in a bubblewrap container,
once with the node agent's vgpu-core answer (library preloaded, no cores limit: allowance 100)
and once with no library, and prints the differences (medians of --runs), the stream-ordered
pair (`cuMemAllocAsync`/`cuMemFreeAsync` on a stream of its own: the stream's context looked up
and pushed, its capture status read, the pool charged) among them; then the cost per launch
under a 50 % cores limit, where every launch is measured with events, as CPU time (the wall
time there is mostly the throttle's waits):

    python bench/interposer_bench.py [--runs 5] [--count 200000]

Targets: under 1 us per launch, under 10 us per pair (either kind), <= 2 % throughput loss.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.isolation.conftest import Cluster, _build
from tests.isolation.sandbox import Container
from vgpu.node.grants import ContainerGrant


def measure(
    cluster: Cluster, container: Container, count: int
) -> tuple[float, float, float, float, float]:
    """(ns per launch, ns per pair, ns per stream-ordered pair, percent busy of a 1 ms spin kernel
    loop over 2 s, ns per launch on a stream of the program's own)."""
    done = cluster.cuload(container, "bench", "0", str(count), timeout=600)
    fields = done.stdout.split()
    assert done.returncode == 0, done.stdout + done.stderr
    before = sum(cluster.node.usage().busy_ns.values())
    spin = cluster.cuload(container, "spin", "0", "2", "1000", "kernel")
    window = int(spin.stdout.split()[-1])
    busy = sum(cluster.node.usage().busy_ns.values()) - before
    busy_percent = 100 * busy / window
    return float(fields[1]), float(fields[3]), float(fields[5]), busy_percent, float(fields[9])


def launch_cpu_ns(cluster: Cluster, container: Container, count: int) -> tuple[float, float]:
    """CPU ns per launch, on the NULL stream and on a stream of the program's own: under a limit
    the wall time per launch is mostly the throttle's waits (the stand-in's events time the
    host's gaps too), which cost no CPU."""
    done = cluster.cuload(container, "bench", "0", str(count), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    fields = done.stdout.split()
    return float(fields[7]), float(fields[11])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=200_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="vgpu-bench-"))
    cluster = Cluster(_build(root / "build"), 1, root / "node")
    with_lib = cluster.admit([(0, 100, 4096)])
    without = Container(ContainerGrant())
    limited = cluster.admit([(0, 50, 4096)])
    rows: dict[str, list[tuple[float, float, float, float, float]]] = {"with": [], "without": []}
    under_limit: list[tuple[float, float]] = []
    unlimited: list[tuple[float, float]] = []  # CPU ns per launch without the library
    for _ in range(args.runs):
        rows["without"].append(measure(cluster, without, args.count))
        rows["with"].append(measure(cluster, with_lib, args.count))
        under_limit.append(launch_cpu_ns(cluster, limited, args.count))
        unlimited.append(launch_cpu_ns(cluster, without, args.count))
    med = {k: [statistics.median(col) for col in zip(*v, strict=True)] for k, v in rows.items()}
    launch = med["with"][0] - med["without"][0]
    pair = med["with"][1] - med["without"][1]
    stream_pair = med["with"][2] - med["without"][2]
    loss = med["without"][3] - med["with"][3]
    print(
        f"launch: {med['without'][0]:.0f} ns without, {med['with'][0]:.0f} ns with: +{launch:.0f} ns"
    )
    print(
        f"alloc/free pair: {med['without'][1]:.0f} ns without, {med['with'][1]:.0f} ns with: +{pair:.0f} ns"
    )
    print(
        f"cuMemAllocAsync/cuMemFreeAsync pair: {med['without'][2]:.0f} ns without, "
        f"{med['with'][2]:.0f} ns with: +{stream_pair:.0f} ns "
        f"({stream_pair - pair:+.0f} ns beside the plain pair: the stream's device and capture)"
    )
    on_stream = med["with"][4] - med["without"][4]
    print(
        f"launch on a stream of its own: {med['without'][4]:.0f} ns without, "
        f"{med['with'][4]:.0f} ns with: +{on_stream:.0f} ns"
    )
    print(
        f"spin throughput: {med['without'][3]:.2f} % without, {med['with'][3]:.2f} % with: -{loss:.2f} points"
    )
    for i, where in enumerate(("", ", on a stream of its own")):
        cpu = statistics.median(r[i] for r in under_limit)
        bare = statistics.median(r[i] for r in unlimited)
        print(
            f"launch under a 50 % limit{where}, CPU: {bare:.0f} ns without, {cpu:.0f} ns with: "
            f"+{cpu - bare:.0f} ns"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
