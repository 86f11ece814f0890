"""The pages' common parts: the frame (head, navigation, status line, Problems) and small
helpers. Pure. Every text that comes from the cluster goes through `esc` or `link`, so a pod
named `<script>` is shown as text, never run; links carry their values URL-quoted.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from urllib.parse import urlencode

from vgpu.inspect.model import Problem

PROBLEMS_SHOWN = 50
"""Problems listed in full on a page; the rest are counted (the JSON document has them all)."""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def href(path: str, **params: str) -> str:
    """A link target with its query escaped for an attribute."""
    query = urlencode({k: v for k, v in params.items() if v})
    return esc(f"{path}?{query}" if query else path)


def link(text: str, path: str, **params: str) -> str:
    return f'<a href="{href(path, **params)}">{esc(text)}</a>'


def pod_link(pod: str) -> str:
    """A pod's name linking to its detail page (the folded "(other namespaces)" holder is not a
    pod and gets no link)."""
    return link(pod, "/pod", name=pod) if "/" in pod else esc(pod)


def width(fraction: float) -> int:
    """A fill as a whole percent 0..100: the stylesheet's `w0`..`w100` classes (the pages set
    no inline styles, so the Content-Security-Policy can forbid them)."""
    return max(0, min(100, round(fraction * 100)))


def bar(fraction: float, kind: str, label: str = "") -> str:
    """A horizontal bar filled to `fraction`, with its value for assistive technology (no
    `label`: the element around it says the value, as a grid cell's title does)."""
    w = width(fraction)
    name = f' role="img" aria-label="{esc(label)}"' if label else ""
    return f'<span class="bar {kind}"{name} data-fill="{w}"><span class="fill w{w}"></span></span>'


def used_bars(busy: float | None, memory: float | None) -> str:
    """The GPU's real use as two thin bars (busy, memory in use), each `data-used` its whole
    percent or "-" when not measured; one "used -" when neither is known."""
    if busy is None and memory is None:
        return '<span class="used none" data-used="-">used -</span>'
    return "".join(
        f'<span class="bar {kind} unknown" data-used="-"></span>'
        if f is None
        else f'<span class="bar {kind}" data-used="{width(f)}"><span class="fill w{width(f)}"></span></span>'
        for f, kind in ((busy, "cu"), (memory, "mu"))
    )


def table(head: Iterable[str], rows: Iterable[Iterable[str]], *, cls: str = "") -> str:
    """A table of already escaped cells."""
    th = "".join(f'<th scope="col">{h}</th>' for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def problems(items: Iterable[Problem]) -> str:
    """The Problems section, first on every page as on the text report's end."""
    found = list(items)
    if not found:
        return (
            '<section id="problems" aria-label="Problems"><p class="ok">No problems.</p></section>'
        )
    lines = "".join(
        f"<li>{pod_link(p.subject) if '/' in p.subject else esc(p.subject)}: {esc(p.message)}</li>"
        for p in found[:PROBLEMS_SHOWN]
    )
    more = len(found) - PROBLEMS_SHOWN
    tail = f"<p>and {more} more (all in /api/view.json)</p>" if more > 0 else ""
    return (
        f'<section id="problems" aria-labelledby="problems-h"><h2 id="problems-h">'
        f"Problems ({len(found)})</h2><ul>{lines}</ul>{tail}</section>"
    )


def status_line(status: Mapping[str, object]) -> str:
    """When the data was read, whether it is stale, whether the extender is up."""
    parts = [f"Read at {esc(status.get('readAt') or 'never')}"]
    if status.get("takenAt"):
        parts.append(f"snapshot taken at {esc(status['takenAt'])}")
    if status.get("error"):
        parts.append(f"last read failed: {esc(status['error'])}")
    if status.get("extender"):
        parts.append(esc(status["extender"]))
    cls = "stale" if status.get("stale") else ("down" if status.get("extenderUp") is False else "")
    state = " (stale)" if status.get("stale") else ""
    return (
        f'<p id="status" role="status" aria-live="polite" class="{cls}"'
        f' data-generation="{esc(status.get("generation", 0))}">'
        f"{' · '.join(parts)}{state}</p>"
    )


def page(title: str, body: str, status: Mapping[str, object], found: Iterable[Problem]) -> str:
    """A whole page: the frame around `body` (already escaped HTML)."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>vgpu: {esc(title)}</title>"
        '<link rel="stylesheet" href="/assets/view.css">'
        '<script src="/assets/view.js" defer></script></head><body>'
        '<header><nav aria-label="Pages"><a href="/">Cluster</a> <a href="/queues">Queues</a> '
        '<a href="/api/view.json">JSON</a></nav>'
        f"{status_line(status)}</header>"
        f'<main id="main"><h1>{esc(title)}</h1>{problems(found)}{body}</main></body></html>'
    )
