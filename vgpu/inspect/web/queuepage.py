"""The queues page: per queue and dimension, deserved vs held vs pending as bars, then the held
pods with why they wait. Pure: the `--queues` report (`vgpu.inspect.queues`) -> HTML; the
bars' values are that report's, the numbers `inspect --queues -o json` prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu.core.queues.proportion import Vec
from vgpu.inspect.queues import QueueLine, QueueReport, headline
from vgpu.inspect.web.html import bar, esc, page, pod_link, table
from vgpu.inspect.web.sharechart import Sample, share_chart
from vgpu.inspect.web.view import View

DIMENSIONS = (("cores", 0), ("memory", 1))
"""The dimensions as `--queues -o json` names them, and their place in a `Vec`."""


def queues_page(
    view: View, status: Mapping[str, object], samples: Sequence[Sample] = (), source: str = ""
) -> str:
    """`samples`: each queue's share over time; `source`: where they come from (`shares`)."""
    report = view.queues
    line = headline(report)
    head = f'<p class="bad">{esc(line)}</p>' if line else ""
    c, m = report.capacity
    body = head + f"<p>Cluster: {c} cores / {m} memory units</p>"
    body += "".join(_queue(q, report) for q in report.queues)
    if report.queues:
        body += '<section aria-label="Share over time"><h2>Share over time</h2>'
        body += share_chart(samples) + f'<p id="share-source">{esc(source)}</p></section>'
    body += _held(report)
    return page("Queues", body, status, view.report.problems)


def _queue(q: QueueLine, report: QueueReport) -> str:
    rows = [
        [f"<th scope='row'>{dim}</th>"]
        + [_bar(q.name, dim, kind, value[i], report.capacity[i]) for kind, value in _kinds(q)]
        for dim, i in DIMENSIONS
    ]
    body = "".join(
        "<tr>" + r[0] + "".join(f"<td>{cell}</td>" for cell in r[1:]) + "</tr>" for r in rows
    )
    return (
        f'<section class="queue" data-queue="{esc(q.name)}" aria-label="Queue {esc(q.name)}">'
        f"<h2>Queue {esc(q.name)}</h2><p>weight {q.weight}, share {float(q.share):.2f}</p>"
        '<table><thead><tr><th scope="col">Dimension</th><th scope="col">Deserved</th>'
        '<th scope="col">Held</th><th scope="col">Pending</th></tr></thead>'
        f"<tbody>{body}</tbody></table></section>"
    )


def _kinds(q: QueueLine) -> tuple[tuple[str, Vec], ...]:
    """Held is the report's "allocated": what the queue's pods hold now."""
    return (("deserved", q.deserved), ("allocated", q.allocated), ("pending", q.pending))


def _bar(queue: str, dim: str, kind: str, value: int, capacity: int) -> str:
    fraction = value / capacity if capacity else 0.0
    label = f"{queue} {kind} {dim}: {value} of {capacity}"
    return (
        f'<span class="qv" data-queue="{esc(queue)}" data-kind="{kind}" data-dim="{dim}" data-value="{value}">'
        f"{value}</span> {bar(fraction, kind, label)}"
    )


def _held(report: QueueReport) -> str:
    if not report.held:
        return "<p>No pods are held.</p>"
    rows = [
        [pod_link(h.pod), esc(h.queue), f"{h.ask[0]}c/{h.ask[1]}m", esc(h.why)] for h in report.held
    ]
    return "<h2>Held pods</h2>" + table(["Held pod", "Queue", "Asks", "Why"], rows)
