"""The default view: one row per node, one column per GPU index, then cluster totals.

Each GPU cell is `used/total` cores and memory, suffixed `!` when the GPU is unhealthy. PENDING
is what is bound to the node but not yet admitted by its kubelet. Pure: Report -> text.
"""

from __future__ import annotations

from vgpu.inspect.layout import columns, memory_pair, mmib, model_name, percent
from vgpu.inspect.model import GpuView, NodeView, Report, Usage

UNHEALTHY_MARK = "!"
NO_VGPU = (
    "No node shown has vgpu GPUs: none carries the vgpu.io/gpu-inventory annotation. "
    "Is the vgpu node agent running there? (kubectl -n vgpu-system get pods -l "
    "app.kubernetes.io/component=node-agent)"
)


def render_table(report: Report) -> str:
    lines: list[str] = []
    if report.taken_at:
        lines.append(f"Snapshot taken at {report.taken_at}")
    if report.nodes:
        width = max(len(n.gpus) for n in report.nodes)
        header = ["NODE", "IP", "MODEL", *(f"GPU{i}" for i in range(width))]
        header += ["PENDING", "CORES", "MEMORY"]
        lines += columns([header, *(_row(n, width) for n in report.nodes)])
        lines.append("")
        lines += summary(report)
    else:
        lines.append(NO_VGPU)
        lines += _footer(report)
    return "\n".join(lines) + "\n"


def _row(node: NodeView, width: int) -> list[str]:
    cells = [_gpu_cell(g) for g in node.gpus] + ["-"] * (width - len(node.gpus))
    name = node.name if node.ready else f"{node.name} (NotReady)"
    models = ", ".join(model_name(m) for m in node.models) or "-"
    return [
        name,
        node.address or "-",
        models,
        *cells,
        pending(node.usage),
        f"{node.usage.cores_used}/{node.usage.cores_total} {percent(node.usage.cores_percent)}",
        f"{memory_pair(node.usage.memory_used_mmib, node.usage.memory_total_mib)} "
        f"{percent(node.usage.memory_percent)}",
    ]


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
    lines = []
    if report.unscheduled:
        n = len(report.unscheduled)
        more = "" if details else " (-d lists them)"
        lines.append(f"Unscheduled: {_plural(n, 'pod')} ask for vgpu and wait for a node{more}")
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
