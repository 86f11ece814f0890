"""Each queue's share over time, from the view's own samples."""

from __future__ import annotations

import re

from tests.web.conftest import Served
from tests.web.test_server import _get
from vgpu.inspect.web.sharechart import HEIGHT, PAD, share_chart


def _points(svg: str) -> dict[str, list[tuple[float, float]]]:
    out = {}
    for points, name in re.findall(r'points="([^"]*)"><title>([^<]*)</title>', svg):
        out[name] = [tuple(map(float, p.split(","))) for p in points.split()]
    return out  # type: ignore[return-value]


def test_one_line_per_queue_and_a_share_of_one_on_the_dashed_line() -> None:
    svg = share_chart([(0.0, {"qa": 1.0, "qb": 0.0}), (60.0, {"qa": 1.0, "qb": 0.5})])
    lines = _points(svg)
    assert set(lines) == {"qa", "qb"}
    dashed = float(re.search(r'y1="([0-9.]+)"', svg).group(1))  # type: ignore[union-attr]
    assert [y for _, y in lines["qa"]] == [dashed, dashed]
    assert lines["qb"][0][1] == HEIGHT - PAD  # share 0 at the bottom
    assert lines["qb"][1][1] == (dashed + HEIGHT - PAD) / 2  # half-way up to 1.0
    assert lines["qa"][0][0] < lines["qa"][1][0]


def test_a_hostile_queue_name_is_escaped_and_one_read_draws_nothing() -> None:
    svg = share_chart([(0.0, {"<script>": 0.2}), (5.0, {"<script>": 0.4})])
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "<svg" not in share_chart([(0.0, {"qa": 1.0})])


def test_the_queues_page_draws_the_samples_of_its_reads(served: Served) -> None:
    assert 'id="share-chart"' not in _get(served.url + "/queues")[2].decode()  # one read
    served.refresher.refresh()
    page = _get(served.url + "/queues")[2].decode()
    assert 'id="share-chart"' in page and set(_points(page)) == {"qa", "qb"}
