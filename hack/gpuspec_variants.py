"""Write GPU-type-constrained variants of the openb default trace (seeded, reproducible).

    python hack/gpuspec_variants.py --out DIR [--fractions 10,20,33,50] [--seed 0]

writes ``DIR/openb_pod_list_spec<NN>.csv`` for each fraction: the default trace's pods, row for
row, with ``gpu_spec`` set on NN % of the GPU pods. Run ``vgpu simulate --pods DIR/...csv``.

The method follows Sec. 6.5 of the FGD paper (Weng et al., ATC'23), where a share of GPU tasks
carries the GPU-type constraints seen in production (about a third there). The authors publish
one such file, gpuspec10; what it shows, and what this generator reproduces:

* constrained pods are drawn uniformly among GPU pods (10 % of each of the fractional, one-GPU
  and multi-GPU classes, within sampling noise); CPU-only pods never carry a constraint;
* the constraint depends on the pod's class, not on its exact shape: fractional pods name T4 or
  P100 (rarely a five-model list), one-GPU pods mostly T4, G2 or the V100s, multi-GPU pods G2.
  `MIX` holds gpuspec10's counts per class and constraint (repeated models merged);
* each constraint is drawn from its class's counts. Unlike gpuspec10 (where two 8-GPU pods name
  G2 but ask 120 CPUs, more than a G2 node has), a draw must leave the pod at least one node
  that could host it alone; a pod with no such constraint is skipped.

One seeded permutation of the GPU pods, with one draw per pod, serves every fraction, so the
variants nest: the pods constrained at 20 % are those of 10 % plus more. Same seed, same files
(docs/research/policies.md lists their sha256).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path
from random import Random

from vgpu.cli.trace_files import embedded
from vgpu.sim.trace import DEFAULT_NODES, DEFAULT_PODS

MIX: dict[str, dict[str, int]] = {
    "share": {"T4": 163, "P100": 98, "G2|P100|T4|V100M16|V100M32": 9},
    "one": {
        "T4": 192,
        "G2": 112,
        "V100M16|V100M32": 61,
        "P100|V100M16|V100M32": 26,
        "G3": 17,
        "G2|P100|T4|V100M16|V100M32": 11,
        "A10|G2|T4|V100M16|V100M32": 9,
        "P100|V100M16": 6,
        "P100|T4|V100M16|V100M32": 5,
        "V100M16": 4,
        "V100M32": 4,
        "A10|G2|P100|T4|V100M16|V100M32": 3,
        "P100": 2,
        "A10|T4": 1,
    },
    "multi": {"G2": 8, "T4|V100M16|V100M32": 1},
}
"""Constraints of the published gpuspec10 file, counted per pod class."""

Row = dict[str, str]
NodeCap = tuple[str, int, int, int]
"""(model, GPUs, milli-CPU, MiB) of one node."""


def pod_class(row: Row) -> str | None:
    """ "share", "one" or "multi" for a GPU pod; None for a CPU-only pod."""
    gpus = int(row["num_gpu"])
    if gpus == 0:
        return None
    if gpus > 1:
        return "multi"
    return "share" if int(row["gpu_milli"]) < 1000 else "one"


def hostable(row: Row, spec: str, nodes: Sequence[NodeCap]) -> bool:
    """Whether some node of an allowed model could host the pod on its own."""
    models = set(spec.split("|"))
    gpus, cpu, mib = int(row["num_gpu"]), int(row["cpu_milli"]), int(row["memory_mib"])
    return any(m in models and g >= gpus and c >= cpu and mem >= mib for m, g, c, mem in nodes)


def draws(rows: Sequence[Row], nodes: Sequence[NodeCap], seed: int) -> list[tuple[int, str]]:
    """(row index, constraint) for the GPU pods in the seeded order of constraining."""
    rng = Random(f"gpuspec-{seed}")
    order = [i for i, r in enumerate(rows) if pod_class(r) is not None]
    rng.shuffle(order)
    out = []
    for i in order:
        mix = MIX[pod_class(rows[i]) or ""]
        specs = [s for s in mix if hostable(rows[i], s, nodes)]
        if specs:
            out.append((i, rng.choices(specs, [mix[s] for s in specs])[0]))
    return out


def constrain(rows: Sequence[Row], picks: Sequence[tuple[int, str]], pct: int) -> list[Row]:
    """The rows with `gpu_spec` set on `pct` % of the GPU pods (the first picks)."""
    gpu_pods = sum(1 for r in rows if pod_class(r) is not None)
    target = round(gpu_pods * pct / 100)
    if target > len(picks):
        raise SystemExit(
            f"only {len(picks)} GPU pods can take a constraint; {pct} % needs {target}"
        )
    chosen = dict(picks[:target])
    return [{**r, "gpu_spec": chosen.get(i, "")} for i, r in enumerate(rows)]


def read_csv(path: Path) -> tuple[list[str], list[Row]]:
    """Header and rows of a CSV file."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or ()), list(reader)


def node_caps(path: Path) -> list[NodeCap]:
    """The GPU nodes of a node list."""
    _, rows = read_csv(path)
    return [
        (r["model"], int(r["gpu"]), int(r["cpu_milli"]), int(r["memory_mib"]))
        for r in rows
        if int(r["gpu"])
    ]


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the CSV files")
    parser.add_argument("--fractions", default="10,20,33,50", help="percentages of GPU pods")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    parser.add_argument("--pods", type=Path, default=embedded(DEFAULT_PODS))
    parser.add_argument("--nodes", type=Path, default=embedded(DEFAULT_NODES))
    args = parser.parse_args(argv)
    header, rows = read_csv(args.pods)
    if "gpu_spec" not in header:
        header.insert(header.index("gpu_milli") + 1, "gpu_spec")
    picks = draws(rows, node_caps(args.nodes), args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    for part in args.fractions.split(","):
        pct = int(part)
        path = args.out / f"openb_pod_list_spec{pct}.csv"
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, header, lineterminator="\n")
            writer.writeheader()
            writer.writerows(constrain(rows, picks, pct))
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
