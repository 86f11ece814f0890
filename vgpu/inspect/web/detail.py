"""A node's page (per GPU, the pods and their shares) and a pod's page (where it is, its gang,
its queue and why it waits, in the report's words). Pure: a `View` -> HTML.
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu.inspect.layout import memory_pair, mmib, model_name
from vgpu.inspect.model import GpuView, Holder, NodeView, Report
from vgpu.inspect.queues import HeldLine
from vgpu.inspect.real_use import container_cell, use_cell
from vgpu.inspect.web.html import bar, esc, link, page, pod_link, table, used_bars
from vgpu.inspect.web.view import View, fills, stranded, used_fills

NOT_TRIED = "not yet tried by the scheduler"
"""What the text report says of a waiting pod the scheduler has not written about."""


def node_page(view: View, name: str, status: Mapping[str, object]) -> str | None:
    """The node's page; None when the report has no such node."""
    node = next((n for n in view.report.nodes if n.name == name), None)
    if node is None:
        return None
    found = [p for p in view.report.problems if p.node == name or p.subject == name]
    state = "Ready" if node.ready else "NotReady"
    head = (
        f"<p>{esc(node.address or '-')} · {state} · backend "
        f"{esc(node.memory_backend or node.mode or '-')}</p>"
    )
    body = head + "".join(_gpu(node, g, view.report) for g in node.gpus)
    return page(f"Node {name}", body, status, found)


def _gpu(node: NodeView, g: GpuView, report: Report) -> str:
    cores, memory = fills(g)
    rows = [
        [pod_link(h.pod), esc(h.container), str(h.cores), esc(mmib(h.memory_mmib)),
         *_used(report, g, h), "admitted" if h.admitted else "pending"]
        for h in g.holders
    ]  # fmt: skip
    holders = (
        table(["Pod", "Container", "Cores", "Memory", *_used_head(report), "State"], rows)
        if rows
        else "<p>No pods hold a share of it.</p>"
    )
    return (
        f'<section id="gpu-{g.index}" aria-labelledby="gpu-{g.index}-h">'
        f'<h2 id="gpu-{g.index}-h">GPU {g.index}: {esc(model_name(g.model))}'
        f"{'' if g.healthy else ' (UNHEALTHY)'}</h2>"
        f"<p>{esc(g.uuid)} · cores {g.cores_used}/{g.cores_total} "
        f"{bar(cores, 'c', f'cores {g.cores_used} of {g.cores_total}')} memory "
        f"{esc(memory_pair(g.memory_used_mmib, g.memory_mib))} "
        f"{bar(memory, 'm', 'memory')} · {round(stranded(g) * 100)} % stranded"
        f"{_gpu_used(report, g)}</p>{holders}</section>"
    )


def _gpu_used(report: Report, g: GpuView) -> str:
    """` · used 3.1Gi 45%` with its bars, as measured (nothing when real use was not asked)."""
    if report.real_use is None:
        return ""
    text = esc(use_cell(report.use_of(g)))
    busy, memory = used_fills(report, g)
    bars = "" if busy is None and memory is None else " " + used_bars(busy, memory)
    return f' · used <span class="used-text">{text}</span>{bars}'


def _used_head(report: Report) -> list[str]:
    return [] if report.real_use is None else ["Memory used"]


def _used(report: Report, g: GpuView, h: Holder) -> list[str]:
    """A holder's memory in use on the GPU ("-": not measured; no cell when not asked)."""
    real = report.real_use
    if real is None:
        return []
    return [esc(container_cell(real.container_mib(h.pod, h.container, g.uuid)))]


def pod_page(view: View, name: str, status: Mapping[str, object]) -> str | None:
    """The pod's page; None when the report knows nothing of the pod."""
    report = view.report
    shares = [(n, g, h) for n in report.nodes for g in n.gpus for h in g.holders if h.pod == name]
    waiting = next((u for u in report.unscheduled if u.pod == name), None)
    held = next((h for h in view.queues.held if h.pod == name), None)
    gang = next((g for g in report.gangs if name in g.members), None)
    found = [p for p in report.problems if p.subject == name]
    queue = view.queue_of_pod.get(name, "")
    if not (shares or waiting or held or gang or found or queue):
        return None
    rows = [
        [link(n.name, "/node", name=n.name) + f" GPU {g.index}", esc(model_name(g.model)),
         esc(h.container), str(h.cores), esc(mmib(h.memory_mmib)), *_used(report, g, h),
         "admitted" if h.admitted else "pending (bound, not yet admitted)"]
        for n, g, h in shares
    ]  # fmt: skip
    head = ["GPU", "Model", "Container", "Cores", "Memory", *_used_head(report), "State"]
    body = "<h2>Assignment</h2>" + (table(head, rows) if rows else "<p>Bound to no GPU.</p>")
    if waiting is not None:
        body += (
            '<h2>Why it waits</h2><p id="why">' + esc(waiting.reason or NOT_TRIED) + "</p>"
            f"<p>Asks {waiting.cores} cores, memory blocks {esc(waiting.memory)}.</p>"
        )
    if (waiting is not None or held is not None) and not shares:
        body += _could_go(view, name)
    body += "<h2>Gang</h2>" + (
        f"<p>{esc(gang.key)}: {esc(gang.state.value)}, {len(gang.members)} members "
        f"(min {esc(gang.min_member if gang.min_member is not None else '?')}), "
        f"{gang.bound} bound, {gang.running} running</p>"
        + "<ul>"
        + "".join(f"<li>{pod_link(m)}</li>" for m in gang.members)
        + "</ul>"
        if gang is not None
        else "<p>In no gang.</p>"
    )
    body += "<h2>Queue</h2>" + _queue(queue, held)
    return page(f"Pod {name}", body, status, found)


def _could_go(view: View, name: str) -> str:
    """Where the placement core would put the pod (and its waiting gang mates) now."""
    where = None if view.placer is None else view.placer.where(name)
    if where is None:
        return ""
    head = '<h2 id="could-go-h">Where it could go now</h2>'
    if where.reason:
        return f'{head}<p id="could-go" class="nowhere">Nowhere now: {esc(where.reason)}</p>'
    gpus = {g.uuid: (n.name, g) for n in view.report.nodes for g in n.gpus}
    rows = []
    for a in where.assignments:
        for c in a.containers:
            for s in c.shares:
                node, g = gpus.get(s.uuid, (a.node, None))
                gpu = "?" if g is None else f"GPU {g.index} ({esc(model_name(g.model))})"
                rows.append([pod_link(a.pod), link(node, "/node", name=node), gpu, esc(c.name),
                             str(s.cores), esc(mmib(s.memory_mmib))])  # fmt: skip
        if not a.containers:
            rows.append([pod_link(a.pod), link(a.node, "/node", name=a.node), "-", "-", "0", "-"])
    whose = f"its gang {esc(where.gang)}'s waiting members" if where.gang else "it"
    return (
        f"{head}<p>If {whose} were placed now, vgpu's placement (policy "
        f"{esc(where.policy)}, on the Ready nodes) would pick:</p>"
        + table(["Pod", "Node", "GPU", "Container", "Cores", "Memory"], rows, cls="could-go")
    )


def _queue(queue: str, held: HeldLine | None) -> str:
    if not queue:
        return "<p>In no queue.</p>"
    text = f"<p>Queue {link(queue, '/queues')}"
    if held is not None:
        text += f'; held: <span id="held-why">{esc(held.why)}</span>'
    return text + "</p>"
