"""Rendering replay results: a readable table, and the lines and labels of the allocation plot.

The table shows, per policy, the median over seeds of the allocation at 100 % arrival and at the
end, pods placed and failed, seconds per run, and — where the FGD paper published a figure for the
default trace — that figure beside ours. The plot is drawn and written by `vgpu.cli.plots`.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from vgpu.sim.engine import RunResult
from vgpu.sim.runner import figure, median_at_100, percent_or_na

PAPER_ALLOC_AT_100 = {
    "random": 86.25,
    "dotprod": 90.56,
    "gpuclustering": 91.58,
    "gpupacking": 91.81,
    "bestfit": 92.91,
    "fgd": 95.23,
}
"""Median GPU allocation % at 100 % arrival on openb default, tune 1.3, seeds 42-51 (the paper's
artifact result files)."""


def _policies(results: Sequence[RunResult]) -> list[str]:
    return list(dict.fromkeys(r.policy for r in results))


LEGEND = """\
  alloc@100%  GPUs allocated (% of the cluster's GPUs) at the moment the pods that arrived ask
              for 100 % of them: the fragmentation measure of the FGD paper, higher is better
  final       GPUs allocated once every pod has arrived (arrivals stop at --tune x capacity)
  placed      pods given GPUs
  failed      pods no node could take (dropped, never retried)
  s/run       seconds one replay took
  paper@100%  the FGD paper's published alloc@100% for that policy (openb default trace,
              --tune 1.3, seeds 42-51); n/a where it has none
  n/a         the figure does not exist (e.g. arrivals below 100 % with --tune under 1)"""


def table(results: Sequence[RunResult], *, paper: bool = True) -> str:
    """A fixed-width table, one row per policy (medians over seeds), and its legend."""
    header = ["policy", "alloc@100%", "final", "placed", "failed", "s/run"]
    if paper:
        header.append("paper@100%")
    rows = [header]
    for name in _policies(results):
        runs = [r for r in results if r.policy == name]
        row = [
            name,
            figure(median_at_100(runs)),
            f"{median(r.alloc_pct_final for r in runs):.2f}",
            f"{median(r.pods_placed for r in runs):.0f}",
            f"{median(r.pods_failed for r in runs):.0f}",
            f"{median(r.seconds for r in runs):.1f}",
        ]
        if paper:
            row.append(figure(PAPER_ALLOC_AT_100.get(name)))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    note = f"{seed_caption(results)}; GPU allocation in % of cluster GPU capacity"
    legend = LEGEND if paper else LEGEND.replace(PAPER_LINES, "")
    return "\n".join([*lines, "", note, legend])


PAPER_LINES = LEGEND[LEGEND.index("  paper@100%") : LEGEND.index("  n/a")]


def _ranges(seeds: Sequence[int]) -> str:
    """Sorted seeds as the --seeds flag spells them: "1, 5, 9-11" (ten seeds stay short)."""
    parts: list[str] = []
    start = prev = seeds[0]
    for seed in [*seeds[1:], None]:
        if seed is not None and seed == prev + 1:
            prev = seed
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if seed is not None:
            start = prev = seed
    return ", ".join(parts)


def seed_caption(results: Sequence[RunResult]) -> str:
    """ "seed 42" for one run per policy, "median of 10 seeds (42-51)" otherwise: a single run's
    curve is not a median, and a reader should not take it for one."""
    seeds = sorted({r.seed for r in results})
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return f"median of {len(seeds)} seeds ({_ranges(seeds)})"


def plot_labels(results: Sequence[RunResult], *, trace: str) -> tuple[str, dict[str, str]]:
    """The plot's title (trace and seeds) and each policy's legend entry with its figure."""
    title = f"GPU allocation as pods arrive: {trace}, {seed_caption(results)}"
    labels = {}
    for name in _policies(results):
        value = median_at_100(r for r in results if r.policy == name)
        labels[name] = f"{name}: {percent_or_na(value)} at 100 %"
    return title, labels


def curves(results: Sequence[RunResult]) -> dict[str, tuple[list[int], list[float]]]:
    """Per policy, the plot's line: arrived workload (%) and the median over seeds of the
    allocation (%) at each step (`vgpu.cli.plots` draws it)."""
    lines = {}
    for name in _policies(results):
        per_step: dict[int, list[float]] = {}
        for r in results:
            if r.policy == name:
                for arrived, alloc in r.curve:
                    per_step.setdefault(int(arrived), []).append(alloc)
        xs = sorted(per_step)
        lines[name] = (xs, [median(per_step[x]) for x in xs])
    return lines
