"""Real use in the web view: with `--prometheus`, each GPU cell, node page and pod page shows
what is used beside what is granted, from the report's own `real_use` (the figures of
`inspect --prometheus -o json`), "-" where a GPU or container has no figure; without it, the
pages are as before. The view asks Prometheus at most every 30 s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.inspect.builders import gpu_uuid, node, pod
from tests.web.test_pages import STATUS, Elements
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.export import report_document
from vgpu.inspect.real_use import (
    AGE_QUERY,
    BUSY_QUERY,
    CONTAINER_QUERY,
    MEMORY_QUERY,
    RealUse,
    from_answers,
)
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.web.detail import node_page, pod_page
from vgpu.inspect.web.pages import cluster_page
from vgpu.inspect.web.refresh import REAL_USE_EVERY_S, Refresher
from vgpu.inspect.web.view import Filter, View, build_view, document

T4 = ("Tesla T4", 15360)
G0, G1, G2 = (gpu_uuid("n1", i) for i in range(3))


def vector(values: Mapping[str, float], **labels: str) -> dict[str, Any]:
    result = [
        {"metric": {"gpu": g, "node": "n1"} | labels, "value": [1.0, str(v)]}
        for g, v in values.items()
    ]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


ANSWERS = {
    MEMORY_QUERY: vector({G0: 3 * 1024**3, G1: 1536 * 1024**2}),
    BUSY_QUERY: vector({G0: 0.45}),
    AGE_QUERY: vector({G0: 12.0, G1: 600.0}),
    CONTAINER_QUERY: vector({G0: 2 * 1024**3}, namespace="t", pod="p", container="main"),
}
"""GPU 0 fully measured, GPU 1 its memory only (and stale), GPU 2 nothing."""


def used_cluster() -> Snapshot:
    """Node n1, three T4s; pod t/p holds half of GPU 0, pod t/q a part of GPU 2."""
    pods = (
        pod("t/p", node="n1", shares={"main": [(0, 50, 8192)]}),
        pod("t/q", node="n1", shares={"main": [(2, 20, 4096)]}),
    )
    return Snapshot((node("n1", [T4] * 3),), pods, (), "")


def _view(real: RealUse | None = None) -> View:
    return build_view(used_cluster(), None, DEFAULT_NAMES, real_use=real)


def test_each_cell_shows_busy_and_memory_in_use_or_a_dash() -> None:
    page = cluster_page(_view(from_answers("prom", ANSWERS)), Filter(), 1, STATUS)
    cells = Elements(page).having("data-used")
    assert [(a["class"], a["data-used"]) for a in cells] == [
        ("bar cu", "45"), ("bar mu", "20"),  # 3 GiB of 15 GiB
        ("bar cu unknown", "-"), ("bar mu", "10"),  # 1.5 GiB, no busy figure
        ("used none", "-"),
    ]  # fmt: skip
    assert "used 3Gi 45%" in page and "used 1.5Gi ? (stale 600s)" in page
    assert "Real use (REAL USE: GPU memory in use, busy %) from prom" in page


def test_without_prometheus_the_pages_show_no_use() -> None:
    view = _view()
    pages = [cluster_page(view, Filter(), 1, STATUS), node_page(view, "n1", STATUS) or "",
             pod_page(view, "t/p", STATUS) or ""]  # fmt: skip
    for text in pages:
        assert not Elements(text).having("data-used")
        assert "used" not in "".join(Elements(text).text).lower()


def test_a_prometheus_that_cannot_be_asked_says_why_and_every_gpu_shows_a_dash() -> None:
    real = RealUse("http://prom:9090", {}, "cannot ask http://prom:9090: refused")
    page = cluster_page(_view(real), Filter(), 1, STATUS)
    assert [a["data-used"] for a in Elements(page).having("data-used")] == ["-"] * 3
    assert "Real use: not known (cannot ask http://prom:9090: refused)" in page


def test_the_node_page_shows_each_gpus_use_and_each_containers_memory_in_use() -> None:
    text = "".join(Elements(node_page(_view(from_answers("prom", ANSWERS)), "n1", STATUS) or "")
                   .text)  # fmt: skip
    assert "used 3Gi 45%" in text and "used 1.5Gi ? (stale 600s)" in text and "used -" in text
    assert "t/pmain508Gi2Giadmitted" in text  # pod, container, cores, granted, used, state
    assert "t/qmain204Gi-admitted" in text  # no figure for that container


def test_the_pod_page_shows_its_memory_in_use_beside_its_grant() -> None:
    text = "".join(Elements(pod_page(_view(from_answers("prom", ANSWERS)), "t/p", STATUS) or "")
                   .text)  # fmt: skip
    assert "Memory used" in text and "main508Gi2Giadmitted" in text


def test_the_json_carries_the_same_figures_as_inspect_prometheus_json() -> None:
    real = from_answers("prom", ANSWERS)
    view = _view(real)
    assert document(view, STATUS)["report"] == report_document(view.report)
    assert document(view, STATUS)["report"]["realUse"]["source"] == "prom"


def test_the_view_asks_prometheus_at_most_every_thirty_seconds() -> None:
    asked: list[float] = []
    now = [1000.0]

    def ask() -> RealUse:
        asked.append(now[0])
        return from_answers("prom", ANSWERS)

    refresher = Refresher(lambda: (used_cluster(), None), DEFAULT_NAMES, 5.0,
                          clock=lambda: now[0], real_use=ask)  # fmt: skip
    for _ in range(7):  # every 5 s for 30 s
        refresher.refresh()
        now[0] += 5.0
    assert asked == [1000.0, 1000.0 + REAL_USE_EVERY_S]
    view, _ = refresher.current()
    assert view.report.use_of(view.report.nodes[0].gpus[0]) is not None


def test_a_gpu_without_a_figure_says_used_dash_once_on_its_node_page() -> None:
    text = "".join(Elements(node_page(_view(from_answers("prom", ANSWERS)), "n1", STATUS) or "")
                   .text)  # fmt: skip
    assert text.count("used -") == 1
