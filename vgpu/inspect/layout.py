"""Text building blocks for the renderers: human memory units, percentages, aligned columns.

Memory pairs share the unit of the total ("4.7/15Gi", "256/512Mi") so a cell reads at a glance;
numbers keep one decimal only when it matters. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu.core.units import MMIB_PER_MIB

GIB = 1024


def number(value: float) -> str:
    """`4` for 4.0, `4.7` for 4.6875: one decimal, dropped when it is zero."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def memory(mib: float) -> str:
    """A memory size in Mi below 1 GiB, else in Gi."""
    return f"{number(mib)}Mi" if mib < GIB else f"{number(mib / GIB)}Gi"


def memory_pair(used_mmib: int, total_mib: int) -> str:
    """`used/total` memory in the total's unit."""
    used_mib = used_mmib / MMIB_PER_MIB
    if total_mib < GIB:
        return f"{number(used_mib)}/{number(total_mib)}Mi"
    return f"{number(used_mib / GIB)}/{number(total_mib / GIB)}Gi"


def mmib(value: int) -> str:
    return memory(value / MMIB_PER_MIB)


def percent(value: float) -> str:
    return f"{value:.0f}%"


def model_name(model: str) -> str:
    """GPU model without the vendor prefix every model carries ("NVIDIA A100-SXM4-80GB")."""
    return model.removeprefix("NVIDIA ").strip()


def columns(rows: Sequence[Sequence[str]], *, indent: str = "", gap: int = 3) -> list[str]:
    """Left-aligned columns, widths from the widest cell; trailing blanks stripped."""
    if not rows:
        return []
    widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append((indent + (" " * gap).join(cells)).rstrip())
    return lines
