"""`vgpu simulate --plot`: drawing the simulator's figures with matplotlib and writing the file.

The lines, labels and titles are computed in `vgpu.sim` (`report.curves`, `report.plot_labels`,
the queued replay's series); drawing and writing are here, at the command's edge, so the
simulator holds no file I/O. `check_plot_path` refuses a FILE that cannot be written before
hours of replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vgpu.core.errors import InvalidRequest
from vgpu.extras import install_hint
from vgpu.sim.engine import RunResult
from vgpu.sim.queues.run import QueueResult
from vgpu.sim.report import curves, plot_labels


def check_plot_path(path: str) -> None:
    """Refuse a --plot FILE that cannot be written, before hours of replays: a folder that does
    not exist, a format matplotlib cannot write, or matplotlib missing."""
    target = Path(path)
    if not target.parent.is_dir():
        raise InvalidRequest(
            "--plot", f"{target.parent} is not an existing directory", "create it first"
        )
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError as err:
        raise InvalidRequest("--plot", f"needs matplotlib ({err})", install_hint("plot")) from err
    formats = FigureCanvasBase.get_supported_filetypes()
    if target.suffix.lstrip(".").lower() not in formats:
        raise InvalidRequest(
            "--plot",
            f"cannot write {target.suffix or 'a file without an extension'}",
            "end the name with one of ." + ", .".join(sorted(formats)),
        )


def plot(results: Sequence[RunResult], path: str, *, trace: str = "trace") -> None:
    """Allocation % against arrived workload %, one line per policy (median over seeds), with
    the 100 % arrival line where alloc@100% is read."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title, labels = plot_labels(results, trace=trace)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    low = 100.0
    for name, (xs, ys) in curves(results).items():
        ax.plot(xs, ys, label=labels[name])
        low = min(low, max(xs, default=0))
    ax.plot([0, 100], [0, 100], color="grey", linestyle=":", label="ideal (every pod placed)")
    ax.axvline(100, color="black", linewidth=0.8, linestyle="--", label="100 % arrival")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("arrived GPU workload (% of cluster GPUs)")
    ax.set_ylabel("allocated GPUs (% of cluster)")
    left = 70 if low >= 100 else 0  # short runs (--tune under 1) are shown whole
    ax.set_xlim(left=left)
    ax.set_ylim(left, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_shares(result: QueueResult, path: str, *, title: str) -> None:
    """Each queue's share of used cores over time, its deserved share dashed, and utilisation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    minutes = [p["min"] for p in result.series]
    for name, figures in result.queues.items():
        line = ax.plot(minutes, [p[name] for p in result.series], label=f"{name} share")[0]
        due = figures["deserved_share_pct"]
        if due is not None:
            ax.axhline(float(due), color=line.get_color(), linestyle="--", linewidth=0.8)
    ax.plot(minutes, [p["used"] for p in result.series], color="grey", label="utilisation")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("minutes")
    ax.set_ylabel("% of used cores (utilisation: % of all cores)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
