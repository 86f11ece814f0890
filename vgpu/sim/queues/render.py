"""Rendering a queued replay: a table per queue and the `--json` document (its plot: `vgpu.cli.plots`)."""

from __future__ import annotations

from vgpu.sim.queues.run import QueueResult

COLUMNS = (
    ("queue", None),
    ("weight", "weight"),
    ("start", "start_min"),
    ("deserved%", "deserved_share_pct"),
    ("share%", "share_mean_pct"),
    ("final%", "share_final_pct"),
    ("converge", "converge_min"),
    ("evicted", "evictions"),
    ("lostGPUh", "lost_gpu_hours"),
    ("wait50", "wait_p50_min"),
    ("wait95", "wait_p95_min"),
)

LEGEND = """\
  start       minutes after the replay's start when the queue starts sending pods
  deserved%   the queue's part of the deserved cores at the end (water-filling over weights
              and what each asks)
  share%      its part of the cores the queues use, mean over the measured window (after the
              last queue starts); final%: at the end
  converge    minutes from its start until its share stays within 5 points of deserved% (at
              the end, every queue backlogged) to the end; n/a: it never settles there
  evicted     its pods evicted by reclaim; lostGPUh: the GPU-hours they had run (lost)
  wait50/95   minutes from arrival to first start, p50 and p95 (pods still waiting at the end
              count with what they waited so far)"""


def _cell(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def table(result: QueueResult) -> str:
    """The per-queue table, the cluster's figures and the legend."""
    rows = [[title for title, _ in COLUMNS]]
    for name, figures in result.queues.items():
        rows.append([name, *(_cell(figures[key]) for _, key in COLUMNS[1:] if key)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    mode = "FCFS (one arrival order, no queues)" if result.setup.fcfs else "queues"
    lines += [
        "",
        f"{mode}: utilisation {_cell(result.utilisation_pct)} % of cores, Jain's index "
        f"{_cell(result.jain) if result.jain is None else f'{result.jain:.3f}'} "
        f"(measured over {result.setup.measure_s / 60:.0f} min after the last queue starts); "
        f"{result.arrivals} arrivals, seed {result.seed}, {result.seconds:.1f} s",
        *_left_lines(result),
        LEGEND,
    ]
    return "\n".join(lines)


def _left_lines(result: QueueResult) -> list[str]:
    """What each queue held when the last queue started, and what of it was left to run then:
    without reclaim, nothing can give a later queue those cores sooner."""
    lines = []
    for name, f in result.queues.items():
        if f["held_at_last_start_pct"]:
            lines.append(
                f"{name} held {_cell(f['held_at_last_start_pct'])} % of cores when the last queue "
                f"started; its pods then running still hold {_cell(f['left_after_60_min_pct'])} % "
                f"an hour on and {_cell(f['left_after_180_min_pct'])} % three hours on unless "
                f"evicted (median time left {_cell(f['left_median_min'])} min)"
            )
    return lines


def as_json(result: QueueResult, inputs: dict[str, object]) -> dict[str, object]:
    """The `--json` document: the run's `inputs` (`vgpu.sim.run_inputs`) and the figures."""
    return {
        "inputs": inputs,
        "arrivals": result.arrivals,
        "utilisation_pct": result.utilisation_pct,
        "jain": result.jain,
        "queues": result.queues,
        "series": result.series,
        "seconds": round(result.seconds, 2),
    }
