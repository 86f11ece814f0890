"""The web view's pages: every name escaped, fills as the report counts them, the queue bars
the numbers of `inspect --queues -o json`, the JSON the report's own document."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.inspect.scenario import demo_cluster
from tests.web.sample import HOSTILE, hostile_cluster, queue_cluster
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.build import build_report
from vgpu.inspect.cli import main
from vgpu.inspect.export import report_document
from vgpu.inspect.model import GpuView, Holder
from vgpu.inspect.snapshot import Snapshot, dumps
from vgpu.inspect.web.detail import node_page, pod_page
from vgpu.inspect.web.pages import cluster_page
from vgpu.inspect.web.queuepage import queues_page
from vgpu.inspect.web.view import Filter, View, build_view, document, stranded

STATUS = {"generation": 1, "readAt": "2025-01-01T12:00:00Z", "stale": False}


class Elements(HTMLParser):
    """Every start tag's attributes, and the text, of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def having(self, attr: str) -> list[dict[str, str]]:
        return [a for _, a in self.tags if attr in a]


def _view(snapshot: Snapshot, config: str | None = None) -> View:
    return build_view(snapshot, config, DEFAULT_NAMES)


def _all_pages(view: View) -> list[str]:
    pods = {h.pod for n in view.report.nodes for g in n.gpus for h in g.holders}
    pods |= {u.pod for u in view.report.unscheduled}
    out = [cluster_page(view, Filter(), 1, STATUS), queues_page(view, STATUS)]
    out += [node_page(view, n.name, STATUS) or "" for n in view.report.nodes]
    return out + [pod_page(view, p, STATUS) or "" for p in pods]


def test_a_pod_named_script_is_shown_as_text_on_every_page() -> None:
    pages = _all_pages(_view(hostile_cluster()))
    assert len(pages) == 5 and all(pages)  # cluster, queues, the node, both pods
    for text in pages:
        assert "<script>alert" not in text and "<img" not in text
        parsed = Elements(text)
        assert [a for t, a in parsed.tags if t == "script"] == [{"src": "/assets/view.js",
                                                                 "defer": ""}]  # fmt: skip
    assert f"ml/{HOSTILE}-w" in "".join(Elements(pages[0]).text)  # the waiting pod
    assert f"default/{HOSTILE}" in "".join(Elements(pages[2]).text)  # the node's holder
    assert "&lt;script&gt;" in pages[0]


def test_each_gpu_cell_fills_to_the_cores_and_memory_the_report_counts() -> None:
    view = _view(demo_cluster())
    cells = Elements(cluster_page(view, Filter(), 1, STATUS)).having("data-cores")
    gpus = [g for n in view.report.nodes for g in n.gpus]
    assert len(cells) == len(gpus) == 9
    fills = [int(a["data-fill"]) for a in Elements(cluster_page(view, Filter(), 1, STATUS))
             .having("data-fill")]  # fmt: skip
    expected = []
    for g in gpus:
        expected += [round(100 * g.cores_used / g.cores_total),
                     round(100 * g.memory_used_mmib / (g.memory_mib * 1000))]  # fmt: skip
    assert fills == expected
    assert [int(c["data-cores"]) for c in cells] == [g.cores_used for g in gpus]


def test_queue_bars_are_the_numbers_inspect_queues_json_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot, config = queue_cluster()
    (tmp_path / "s.json").write_text(dumps(snapshot, as_json=True, names=DEFAULT_NAMES))
    (tmp_path / "q.json").write_text(config)
    assert main(["--fake-cluster", str(tmp_path / "s.json"), "--queues", "-o", "json",
                 "--queues-file", str(tmp_path / "q.json")]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    view = _view(snapshot, config)
    bars = Elements(queues_page(view, STATUS)).having("data-value")
    queues = {q["name"]: q for q in printed["queues"]}
    assert len(bars) == 2 * 3 * len(queues) == 12  # per queue: 2 dimensions x 3 bars
    for b in bars:
        assert int(b["data-value"]) == queues[b["data-queue"]][b["data-kind"]][b["data-dim"]]
    assert queues["qb"]["pending"]["cores"] == 200  # the sample's held pods are there
    assert document(view, STATUS)["queues"] == printed


def test_the_json_document_is_the_reports_own_json() -> None:
    snapshot = demo_cluster()
    view = _view(snapshot)
    expected = report_document(build_report(snapshot, (), DEFAULT_NAMES))
    assert json.loads(json.dumps(document(view, STATUS)))["report"] == json.loads(
        json.dumps(expected)
    )


def test_a_waiting_pod_page_gives_the_reports_reason() -> None:
    view = _view(demo_cluster())
    waiting = next(u for u in view.report.unscheduled if u.pod == "ml/bert-0")
    text = pod_page(view, "ml/bert-0", STATUS) or ""
    assert f'<p id="why">{waiting.reason}</p>' in text
    assert "ml/bert: Waiting" in text
    assert pod_page(view, "ml/nobody", STATUS) is None


@pytest.mark.parametrize(
    ("f", "nodes"),
    [
        (Filter(model="Tesla T4"), ["gpu-a"]),
        (Filter(node="gpu-b"), ["gpu-b"]),
        (Filter(search="tf-worker-3"), ["gpu-c"]),
        (Filter(search="a100"), ["gpu-b", "gpu-c"]),
        (Filter(namespace="ml"), ["gpu-a", "gpu-b", "gpu-c"]),
    ],
)
def test_filters_keep_the_nodes_they_name(f: Filter, nodes: list[str]) -> None:
    page = Elements(cluster_page(_view(demo_cluster()), f, 1, STATUS))
    assert [a["data-node"] for a in page.having("data-node")] == nodes


def test_a_namespace_filter_folds_the_other_namespaces_as_inspect_n_does() -> None:
    text = cluster_page(_view(demo_cluster()), Filter(namespace="ml"), 1, STATUS)
    assert "default/infer-1" not in text and "(other namespaces)" in text


@given(
    st.lists(st.tuples(st.integers(0, 100), st.integers(0, 15360)), max_size=4),
    st.booleans(),
)
def test_stranded_is_the_free_part_of_one_dimension_once_the_other_is_full(
    shares: list[tuple[int, int]], healthy: bool
) -> None:
    holders = tuple(Holder(f"ns/p{i}", "c", c, m * 1000, True) for i, (c, m) in enumerate(shares))
    gpu = GpuView(0, "u", "T4", healthy, 100, 15360, holders)
    part = stranded(gpu)
    assert 0.0 <= part <= 1.0
    if not holders or not healthy:
        assert part == 0.0
    cores_full, memory_full = gpu.cores_used >= 100, gpu.memory_used_mmib >= 15360 * 1000
    if healthy and cores_full and not memory_full:
        assert part > 0.0  # all cores granted: the free memory cannot be used
    if not cores_full and not memory_full:
        assert part == 0.0  # an ask can still take some of both


def test_a_large_cluster_is_paged_and_every_node_is_on_one_page() -> None:
    from bench.inspect_report import cluster
    from vgpu.inspect.web.pages import PAGE_NODES

    view = _view(cluster(250, 2))
    seen: list[str] = []
    for number in (1, 2, 3):
        page = Elements(cluster_page(view, Filter(), number, STATUS))
        rows = [a["data-node"] for a in page.having("data-node")]
        assert len(rows) == min(PAGE_NODES, 250 - len(seen))
        seen += rows
    assert seen == sorted(n.name for n in view.report.nodes)
    assert 'href="/?page=3"' in cluster_page(view, Filter(), 1, STATUS)


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        ({"stale": False, "extenderUp": True}, ""),
        ({"stale": False, "extenderUp": False, "extender": "Extender: DOWN"}, "down"),
        ({"stale": True, "extenderUp": False, "error": "cannot reach"}, "stale"),
    ],
)
def test_the_status_line_is_marked_when_stale_or_the_extender_is_down(
    status: dict[str, object], cls: str
) -> None:
    page = Elements(cluster_page(_view(demo_cluster()), Filter(), 1, status))
    (line,) = [a for t, a in page.tags if a.get("id") == "status"]
    assert line["class"] == cls
