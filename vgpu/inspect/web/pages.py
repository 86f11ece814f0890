"""The cluster page: filters, the nodes grouped by GPU model, and the grid of GPU cells.

Pure: a `View` and its filters -> HTML. Each GPU is one cell: its cores and memory fill (what
is granted, as the report counts it), its colour the stranded fraction (`view.stranded`), its
model, health and the node's backend. At 1,000 nodes the groups' summary comes first and the
grid is paged (`PAGE_NODES` nodes a page), so the first page stays small (bench/web_view.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby

from vgpu.inspect.layout import memory_pair, model_name
from vgpu.inspect.model import GpuView, NodeView, Report, Usage
from vgpu.inspect.real_use import footer, use_cell
from vgpu.inspect.web.html import bar, esc, href, link, page, pod_link, table, used_bars
from vgpu.inspect.web.view import (
    Filter,
    View,
    fills,
    filtered,
    stranded,
    stranded_class,
    used_fills,
)

PAGE_NODES = 100


def cluster_page(view: View, f: Filter, number: int, status: Mapping[str, object]) -> str:
    report = filtered(view.report, f)
    nodes = report.nodes
    pages = max(1, -(-len(nodes) // PAGE_NODES))
    number = max(1, min(number, pages))
    shown = nodes[(number - 1) * PAGE_NODES : number * PAGE_NODES]
    body = (
        _filters(view.report, f)
        + _totals(report.totals, len(nodes))
        + _groups(nodes, f)
        + _grid(shown, report)
        + _pager(f, number, pages)
        + _waiting(report)
    )
    return page("Cluster", body, status, report.problems)


def _filters(report: Report, f: Filter) -> str:
    """A GET form: the filters work without the script, and the URL says what is shown."""
    models = sorted({m for n in report.nodes for m in n.models})
    options = "".join(
        f'<option value="{esc(m)}"{" selected" if m == f.model else ""}>{esc(m)}</option>'
        for m in models
    )
    return (
        '<form id="filters" method="get" action="/" role="search">'
        '<label>Search <input name="q" type="search" '
        f'value="{esc(f.search)}" placeholder="node, model or pod"></label> '
        f'<label>Model <select name="model"><option value="">any</option>{options}</select></label> '
        f'<label>Node <input name="node" value="{esc(f.node)}"></label> '
        f'<label>Namespace <input name="namespace" value="{esc(f.namespace)}"></label> '
        '<button type="submit">Filter</button>'
        + (' <a href="/">clear</a>' if f.active else "")
        + "</form>"
    )


def _totals(u: Usage, nodes: int) -> str:
    return (
        f'<p id="totals">{nodes} nodes, {u.gpus} GPUs ({u.unhealthy} unhealthy): cores '
        f"{u.cores_used}/{u.cores_total} ({u.cores_percent:.1f} %), memory "
        f"{esc(memory_pair(u.memory_used_mmib, u.memory_total_mib))} "
        f"({u.memory_percent:.1f} %), pending {u.pending_pods} pods</p>"
    )


def _groups(nodes: tuple[NodeView, ...], f: Filter) -> str:
    """One row per set of GPU models: how full that part of the cluster is, and how much of it
    is stranded; its name filters the grid to it."""
    key = lambda n: ", ".join(n.models)  # noqa: E731
    rows = []
    for models, members in groupby(sorted(nodes, key=key), key=key):
        group = list(members)
        gpus = [g for n in group for g in n.gpus]
        u = Usage()
        for n in group:
            u = u.plus(n.usage)
        lopsided = sum(1 for g in gpus if stranded(g) > 0)
        first = group[0].models[0] if group[0].models else ""
        name = link(models, "/", model=first, namespace=f.namespace) if first else "-"
        rows.append(
            [name, str(len(group)), str(len(gpus)), str(u.unhealthy),
             f"{u.cores_percent:.1f} %", f"{u.memory_percent:.1f} %", str(lopsided)]
        )  # fmt: skip
    head = ["GPU models", "Nodes", "GPUs", "Unhealthy", "Cores", "Memory", "Stranding GPUs"]
    return '<section aria-label="Groups"><h2>Groups</h2>' + table(head, rows) + "</section>"


def _grid(nodes: tuple[NodeView, ...], report: Report) -> str:
    rows = "".join(_node_row(n, report) for n in nodes)
    real = report.real_use
    used = (
        ""
        if real is None
        else " Below them, thin: how busy it is and its memory in use, as measured "
        '("-": not measured).'
    )
    legend = (
        '<p class="legend">Each cell: a GPU; upper bar cores, lower bar memory granted;'
        f"{used} colour: "
        '<span class="s0">none</span> <span class="s1">&lt;10 %</span> '
        '<span class="s2">&lt;25 %</span> <span class="s3">&lt;50 %</span> '
        '<span class="s4">50 % or more</span> of it stranded.</p>'
    )
    if real is not None:
        legend += f'<p id="real-use">{esc(footer(real))}</p>'

    return (
        f'<section aria-label="GPUs"><h2>GPUs</h2>{legend}<table id="grid">'
        '<thead><tr><th scope="col">Node</th><th scope="col">State</th>'
        '<th scope="col">Backend</th><th scope="col">GPUs</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></section>"
    )


def _node_row(n: NodeView, report: Report) -> str:
    state = "Ready" if n.ready else '<strong class="bad">NotReady</strong>'
    backend = esc(n.memory_backend or ("dra" if n.mode == "dra" else "-"))
    cells = "".join(_cell(n, g, report) for g in n.gpus)
    name = link(n.name, "/node", name=n.name)
    return f'<tr data-node="{esc(n.name)}"><th scope="row">{name}</th><td>{state}</td><td>{backend}</td><td class="cells">{cells}</td></tr>'


def _cell(n: NodeView, g: GpuView, report: Report) -> str:
    """One GPU: kept small (a first page holds 800 of them), its words in the title; with
    real use asked for (`--prometheus`), two thin bars of what is used."""
    cores, memory = fills(g)
    part = stranded(g)
    health = "ok" if g.healthy else "UNHEALTHY"
    pods = ", ".join(sorted({h.pod for h in g.holders})) or "no pods"
    title = (
        f"GPU {g.index} {g.model} {health}: cores {g.cores_used}/{g.cores_total}, memory "
        f"{memory_pair(g.memory_used_mmib, g.memory_mib)}, {round(part * 100)} % stranded; {pods}"
    )
    used = ""
    if report.real_use is not None:
        title += f"; used {use_cell(report.use_of(g))}"
        used = used_bars(*used_fills(report, g))
    sick, mark = ("", "") if g.healthy else (" sick", '<span class="bad">UNHEALTHY</span>')
    return (
        f'<a class="gpu s{stranded_class(part)}{sick}" href="{href("/node", name=n.name)}'
        f'#gpu-{g.index}" title="{esc(title)}" data-index="{g.index}" data-cores="{g.cores_used}">'
        f'<span class="idx">{g.index} {esc(model_name(g.model))}</span>'
        f"{bar(cores, 'c')}{bar(memory, 'm')}{used}{mark}</a>"
    )


def _pager(f: Filter, number: int, pages: int) -> str:
    if pages == 1:
        return ""
    params = {"q": f.search, "model": f.model, "node": f.node, "namespace": f.namespace}
    links = [
        f"<strong>{i}</strong>" if i == number else link(str(i), "/", page=str(i), **params)
        for i in range(1, pages + 1)
    ]
    return f'<nav aria-label="Grid pages" class="pager">Page {" ".join(links)}</nav>'


def _waiting(report: Report) -> str:
    """Pods bound to no node yet, with the report's words for why; gangs."""
    out = ""
    if report.unscheduled:
        rows = [
            [pod_link(u.pod), str(u.cores), esc(u.memory), esc(u.gang or "-"),
             esc(u.reason or "not yet tried by the scheduler")]
            for u in report.unscheduled
        ]  # fmt: skip
        head = ["Waiting pod", "Cores", "Memory blocks", "Gang", "Why"]
        out += '<section aria-label="Waiting pods"><h2>Waiting pods</h2>'
        out += table(head, rows, cls="waiting") + "</section>"
    if report.gangs:
        rows = [
            [esc(g.key), esc(g.state.value), esc(g.min_member if g.min_member is not None else "?"),
             str(len(g.members)), str(g.bound), str(g.running), esc(", ".join(g.nodes) or "-")]
            for g in report.gangs
        ]  # fmt: skip
        head = ["Gang", "State", "Min", "Members", "Bound", "Running", "Nodes"]
        out += '<section aria-label="Gangs"><h2>Gangs</h2>' + table(head, rows) + "</section>"
    return out
