"""Rendering replay results: a readable table, and the allocation-vs-arrival plot.

The table shows, per policy, the median over seeds of the allocation at 100 % arrival and at the
end, pods placed and failed, seconds per run, and — where the FGD paper published a figure for the
default trace — that figure beside ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from vgpu.sim.engine import RunResult

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


def table(results: Sequence[RunResult], *, paper: bool = True) -> str:
    """A fixed-width table, one row per policy (medians over seeds)."""
    header = ["policy", "alloc@100%", "final", "placed", "failed", "s/run"]
    if paper:
        header.append("paper@100%")
    rows = [header]
    for name in _policies(results):
        runs = [r for r in results if r.policy == name]
        row = [
            name,
            f"{median(r.alloc_pct_at_100 for r in runs):.2f}",
            f"{median(r.alloc_pct_final for r in runs):.2f}",
            f"{median(r.pods_placed for r in runs):.0f}",
            f"{median(r.pods_failed for r in runs):.0f}",
            f"{median(r.seconds for r in runs):.1f}",
        ]
        if paper:
            ref = PAPER_ALLOC_AT_100.get(name)
            row.append("" if ref is None else f"{ref:.2f}")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    seeds = sorted({r.seed for r in results})
    note = f"median over seed(s) {', '.join(map(str, seeds))}; GPU allocation % of cluster capacity"
    return "\n".join([*lines, "", note])


def plot(results: Sequence[RunResult], path: str) -> None:
    """Allocation % against arrived workload %, one line per policy (median over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in _policies(results):
        per_step: dict[int, list[float]] = {}
        for r in results:
            if r.policy == name:
                for arrived, alloc in r.curve:
                    per_step.setdefault(int(arrived), []).append(alloc)
        xs = sorted(per_step)
        ax.plot(xs, [median(per_step[x]) for x in xs], label=name)
    ax.plot([0, 100], [0, 100], color="grey", linestyle=":", label="ideal")
    ax.set_xlabel("arrived GPU workload (% of cluster GPUs)")
    ax.set_ylabel("allocated GPUs (% of cluster)")
    ax.set_xlim(left=70)
    ax.set_ylim(70, 100)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
