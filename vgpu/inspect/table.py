"""The default view: one row per node, one column per GPU index, then cluster totals.

Each GPU cell is `used/total` cores and memory, suffixed `!` when the GPU is unhealthy. PENDING
is what is bound to the node but not yet admitted by its kubelet. When that is wider than the
terminal (8-GPU nodes make ~200 columns), the cells condense to percentages of each GPU, then
the IP, the model and the per-GPU columns give way, and last each GPU shows only its fuller
share (cores or memory); `-d` keeps every detail. With `--prometheus`, REAL USE lists each
GPU's memory in use and busy % as the agents measure them (`vgpu.inspect.real_use`).
Pure: Report -> text.
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.core.units import MMIB_PER_MIB
from vgpu.inspect.layout import columns, memory_pair, mmib, model_name, percent
from vgpu.inspect.model import GpuView, NodeView, Report, Usage
from vgpu.inspect.real_use import footer, use_cell

UNHEALTHY_MARK = "!"
NO_VGPU = (
    "No node shown has vgpu GPUs: none carries the vgpu.io/gpu-inventory annotation. "
    "Is the vgpu node agent running there? (kubectl -n vgpu-system get pods -l "
    "app.kubernetes.io/component=node-agent)"
)


def render_table(report: Report, *, width: int | None = None) -> str:
    """The table, in the first layout that fits `width` columns (None: the full layout)."""
    lines: list[str] = []
    if report.taken_at:
        lines.append(f"Snapshot taken at {report.taken_at}")
    if report.nodes:
        lines += fit(report, width)
        lines.append("")
        lines += summary(report)
    else:
        lines.append(NO_VGPU)
        lines += _footer(report)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Layout:
    """How much of a node fits on one line. `cell`: "full" (used/total cores and memory),
    "pair" (cores %/memory % of the GPU) or "fuller" (the larger of the two); then whether the
    IP and the model are shown, and whether each GPU has a column of its own."""

    cell: str = "full"
    address: bool = True
    model: bool = True
    gpu_columns: bool = True


LAYOUTS = (
    Layout(),
    Layout("pair"),
    Layout("pair", address=False),
    Layout("pair", address=False, model=False),
    Layout("pair", address=False, model=False, gpu_columns=False),
    Layout("fuller", address=False, model=False, gpu_columns=False),
)
NOTES = {
    "pair": "GPU cells: cores/memory in use, % of that GPU (-d: pods and amounts per GPU)",
    "fuller": "GPU cells: % of each GPU in use (cores or memory, the fuller); -d for detail",
}
GPUS_HEADER = {"pair": "GPUS (cores/memory %)", "fuller": "GPUS (% used)"}


def fit(report: Report, width: int | None) -> list[str]:
    """The node table in the first layout no wider than `width` (the last one if none is)."""
    for layout in LAYOUTS:
        lines = _table(report, layout)
        if width is None or max(len(line) for line in lines) <= width:
            return lines
    return lines


def _table(report: Report, layout: Layout) -> list[str]:
    width = max(len(n.gpus) for n in report.nodes)
    header = ["NODE"] + ["IP"] * layout.address + ["MODEL"] * layout.model
    if layout.gpu_columns:
        header += [f"GPU{i}" for i in range(width)]
    else:
        header.append(GPUS_HEADER[layout.cell])
    header += ["PENDING", "CORES", "MEMORY"]
    rows = [header, *(_row(n, width, layout) for n in report.nodes)]
    if report.real_use is not None and layout.cell == "full":  # condensed layouts leave it out
        rows = [[*rows[0], "REAL USE"]] + [
            [*row, ", ".join(use_cell(report.use_of(g)) for g in n.gpus)]
            for row, n in zip(rows[1:], report.nodes, strict=True)
        ]
    if layout.cell == "full":
        return columns(rows)
    return [*columns(rows, gap=2), NOTES[layout.cell]]


def _row(node: NodeView, width: int, layout: Layout) -> list[str]:
    cell = {"full": _gpu_cell, "pair": _pair_cell, "fuller": _fuller_cell}[layout.cell]
    cells = [cell(g) for g in node.gpus] + ["-"] * (width - len(node.gpus))
    name = node.name if node.ready else f"{node.name} (NotReady)"
    if node.mode:
        name = f"{name} [{node.mode}]"
    if node.memory_backend == "driver":  # the one backend that holds against a hostile tenant
        name = f"{name} [driver memory]"
    models = ", ".join(model_name(m) for m in node.models) or "-"
    u = node.usage
    row = [name] + [node.address or "-"] * layout.address + [models] * layout.model
    row += cells if layout.gpu_columns else [" ".join(cells[: len(node.gpus)])]
    if layout.cell != "full":
        pods = "-" if not u.pending_pods else f"{u.pending_pods} pod" + "s" * (u.pending_pods > 1)
        return [*row, pods, percent(u.cores_percent), percent(u.memory_percent)]
    return [
        *row,
        pending(u),
        f"{u.cores_used}/{u.cores_total} {percent(u.cores_percent)}",
        f"{memory_pair(u.memory_used_mmib, u.memory_total_mib)} {percent(u.memory_percent)}",
    ]


def _used(gpu: GpuView) -> tuple[float, float]:
    """Cores and memory in use, % of the GPU."""
    cores = 100.0 * gpu.cores_used / gpu.cores_total if gpu.cores_total else 0.0
    memory = 100.0 * gpu.memory_used_mmib / (gpu.memory_mib * MMIB_PER_MIB or 1)
    return cores, memory


def _pair_cell(gpu: GpuView) -> str:
    cores, memory = _used(gpu)
    return f"{cores:.0f}/{memory:.0f}" + ("" if gpu.healthy else UNHEALTHY_MARK)


def _fuller_cell(gpu: GpuView) -> str:
    return f"{max(_used(gpu)):.0f}" + ("" if gpu.healthy else UNHEALTHY_MARK)


def _gpu_cell(gpu: GpuView) -> str:
    text = f"{gpu.cores_used}/{gpu.cores_total} {memory_pair(gpu.memory_used_mmib, gpu.memory_mib)}"
    return text if gpu.healthy else text + UNHEALTHY_MARK


def pending(usage: Usage) -> str:
    if not usage.pending_pods:
        return "-"
    pods = "pod" if usage.pending_pods == 1 else "pods"
    return f"{usage.pending_pods} {pods}: {usage.pending_cores}c {mmib(usage.pending_memory_mmib)}"


def summary(report: Report, *, details: bool = False) -> list[str]:
    """Cluster totals and the footer notes (shared with the details view)."""
    t = report.totals
    unhealthy = f" ({t.unhealthy} unhealthy)" if t.unhealthy else ""
    lines = [
        f"Cluster: {_plural(len(report.nodes), 'node')}, {_plural(t.gpus, 'GPU')}{unhealthy}",
        f"  cores    {t.cores_used}/{t.cores_total} ({percent(t.cores_percent)})",
        f"  memory   {memory_pair(t.memory_used_mmib, t.memory_total_mib)} "
        f"({percent(t.memory_percent)})",
        f"  pending  {pending(t)}" + ("  (bound, not yet admitted)" if t.pending_pods else ""),
    ]
    if t.unhealthy:
        lines.append(f"{UNHEALTHY_MARK} = unhealthy GPU: no new pods are placed on it")
    return lines + _footer(report, details=details)


def _footer(report: Report, *, details: bool = False) -> list[str]:
    lines = [report.extender.line()] if report.extender is not None else []
    if report.real_use is not None:
        lines.append(footer(report.real_use))
    if report.unscheduled:
        n = len(report.unscheduled)
        more = "" if details else " (-d lists them)"
        verbs = "asks for vgpu and waits" if n == 1 else "ask for vgpu and wait"
        lines.append(f"Unscheduled: {_plural(n, 'pod')} {verbs} for a node{more}")
    if report.without_vgpu:
        lines.append(
            f"Nodes without vgpu ({len(report.without_vgpu)}): {', '.join(report.without_vgpu)}"
        )
    if report.problems:
        lines.append("Problems:")
        lines += [f"  {p.subject}: {p.message}" for p in report.problems]
    return lines


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
