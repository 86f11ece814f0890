"""The `-d/--details` view: per node and GPU, which containers hold what; gangs; waiting pods.

Pure: Report -> text. Shares are listed under their GPU with `admitted` or `pending` (bound but
not yet allocated by the kubelet).
"""

from __future__ import annotations

from vgpu.inspect.layout import columns, memory_pair, mmib, model_name, percent
from vgpu.inspect.model import GpuView, Holder, NodeView, Report
from vgpu.inspect.real_use import container_cell, use_cell
from vgpu.inspect.table import NO_VGPU, pending, summary


def render_details(report: Report) -> str:
    lines: list[str] = []
    if report.taken_at:
        lines += [f"Snapshot taken at {report.taken_at}", ""]
    if not report.nodes:
        lines.append(NO_VGPU)
    for node in report.nodes:
        lines += [*_node(node, report), ""]
    if report.gangs:
        lines += [*_gangs(report), ""]
    if report.unscheduled:
        lines += [*_unscheduled(report), ""]
    if report.nodes:
        lines += summary(report, details=True)
    return "\n".join(lines).rstrip("\n") + "\n"


def _node(node: NodeView, report: Report) -> list[str]:
    state = "Ready" if node.ready else "NotReady"
    head = f"NODE {node.name}  {node.address or '-'}  {state}"
    if node.memory_backend:
        head += f"  memory held by: {node.memory_backend}"
    real = report.real_use is not None  # --prometheus: one more column, what is really used
    rows = [["GPU", "MODEL", "CORES", "MEMORY", "HEALTH", "UUID", *["REAL USE"] * real]]
    for gpu in node.gpus:
        rows.append([*_gpu_row(gpu), *_real(report, gpu)])
        rows += [
            [
                "",
                f"  {h.pod} [{h.container}]",
                str(h.cores),
                mmib(h.memory_mmib),
                "admitted" if h.admitted else "pending",
                "",
                *_real(report, gpu, h),
            ]
            for h in gpu.holders
        ]
    u = node.usage
    total = (
        f"  total: cores {u.cores_used}/{u.cores_total} ({percent(u.cores_percent)}), memory "
        f"{memory_pair(u.memory_used_mmib, u.memory_total_mib)} ({percent(u.memory_percent)}), "
        f"pending {pending(u)}"
    )
    return [head, *columns(rows, indent="  ", gap=2), total]


def _real(report: Report, gpu: GpuView, holder: Holder | None = None) -> list[str]:
    """The REAL USE cell of a GPU's row or of one of its holders' (none without --prometheus)."""
    real = report.real_use
    if real is None:
        return []
    if holder is None:
        return [use_cell(report.use_of(gpu))]
    return [container_cell(real.container_mib(holder.pod, holder.container, gpu.uuid))]


def _gpu_row(gpu: GpuView) -> list[str]:
    cores_pct = 100.0 * gpu.cores_used / gpu.cores_total if gpu.cores_total else 0.0
    return [
        str(gpu.index),
        model_name(gpu.model),
        f"{gpu.cores_used}/{gpu.cores_total} {percent(cores_pct)}",
        memory_pair(gpu.memory_used_mmib, gpu.memory_mib),
        "ok" if gpu.healthy else "UNHEALTHY",
        gpu.uuid,
    ]


def _gangs(report: Report) -> list[str]:
    rows = [["GANG", "STATE", "MIN", "MEMBERS", "BOUND", "RUNNING", "NODES"]]
    for g in report.gangs:
        rows.append(
            [
                g.key,
                g.state.value,
                str(g.min_member) if g.min_member is not None else "?",
                str(len(g.members)),
                str(g.bound),
                str(g.running),
                ",".join(g.nodes) or "-",
            ]
        )
    return columns(rows, gap=2)


def _unscheduled(report: Report) -> list[str]:
    """Each waiting pod, its asks ("auto": memory comes with its cores) and, under it, the
    scheduler's or the extender's last word on it."""
    rows = [["UNSCHEDULED POD", "CORES", "MEMORY BLOCKS", "GANG"]]
    rows += [[u.pod, str(u.cores), u.memory, u.gang or "-"] for u in report.unscheduled]
    lines = columns(rows, gap=2)
    out = lines[:1]
    for line, u in zip(lines[1:], report.unscheduled, strict=True):
        out += [line, f"    why: {u.reason or 'not yet tried by the scheduler'}"]
    return out
