"""The web view in a real browser (headless Chromium): the grid's cells and fills, a waiting
pod's reason one click away, queue bars as `inspect --queues -o json` prints them, a hostile
name shown and not run, a new pod appearing without a reload, a server gone said on the page.
Each page's screenshot is kept (`browser.screenshots`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.inspect.builders import pod
from tests.inspect.scenario import demo_cluster
from tests.prometheus_stub import serving as prometheus_serving
from tests.web.browser import chromium, screenshots, serving
from tests.web.sample import HOSTILE, hostile_cluster, queue_cluster
from tests.web.test_used import ANSWERS as USED_ANSWERS
from tests.web.test_used import used_cluster
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.build import build_report
from vgpu.inspect.cli import main
from vgpu.inspect.snapshot import Snapshot, dumps
from vgpu.inspect.web.where import where_now

pytestmark = pytest.mark.timeout(180)


def _save(path: Path, snapshot: Snapshot) -> Path:
    path.write_text(dumps(snapshot, as_json=True, names=DEFAULT_NAMES))
    return path


def _cluster() -> tuple[Snapshot, str]:
    """The demo cluster with the queue sample's node, pods and queues beside it."""
    demo = demo_cluster()
    queued, config = queue_cluster()
    both = dataclasses.replace(demo, nodes=demo.nodes + queued.nodes, pods=demo.pods + queued.pods)
    return both, config


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    snapshot, config = _cluster()
    path = _save(tmp_path / "cluster.json", snapshot)
    (tmp_path / "queues.json").write_text(config)
    with serving(path, "--queues-file", str(tmp_path / "queues.json")) as url:
        yield url, path


def _shot(browser: Any, tmp_path: Path, name: str) -> None:
    browser.save_screenshot(str(screenshots(tmp_path) / f"{name}.png"))


def _fill(browser: Any, bar: Any) -> float:
    """How much of a bar its fill covers, as drawn (percent)."""
    inner = bar.find_element("css selector", ".fill")
    return 100.0 * float(inner.rect["width"]) / float(bar.rect["width"])


def test_the_grid_shows_every_gpu_with_its_fill(
    browser: Any, site: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = site
    browser.get(url + "/")
    report = build_report(_cluster()[0], (), DEFAULT_NAMES)
    gpus = {(n.name, g.index): g for n in report.nodes for g in n.gpus}
    cells = browser.find_elements("css selector", "#grid a.gpu")
    assert len(cells) == len(gpus) == 13
    for cell in cells:
        row = cell.find_element("xpath", "./ancestor::tr")
        g = gpus[(row.get_attribute("data-node"), int(cell.get_attribute("data-index")))]
        cores, memory = cell.find_elements("css selector", ".bar")
        assert _fill(browser, cores) == pytest.approx(100 * g.cores_used / g.cores_total, abs=1.5)
        used = 100 * g.memory_used_mmib / (g.memory_mib * 1000)
        assert _fill(browser, memory) == pytest.approx(used, abs=1.5)
    _shot(browser, tmp_path, "cluster")


def test_clicking_a_waiting_pod_shows_the_reports_reason(
    browser: Any, site: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = site
    browser.get(url + "/")
    reason = next(u.reason for u in build_report(_cluster()[0], (), DEFAULT_NAMES).unscheduled
                  if u.pod == "ml/bert-1")  # fmt: skip
    browser.find_element("link text", "ml/bert-1").click()
    assert browser.find_element("id", "why").text == reason
    assert "ml/bert: Waiting" in browser.find_element("tag name", "main").text
    _shot(browser, tmp_path, "pod")


def test_a_queue_bar_matches_inspect_queues_json(
    browser: Any, site: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, path = site
    assert main(["--fake-cluster", str(path), "--queues", "-o", "json",
                 "--queues-file", str(path.parent / "queues.json")]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    capacity = printed["capacity"]
    browser.get(url + "/queues")
    values = browser.find_elements("css selector", ".qv")
    assert len(values) == 12
    for v in values:
        queue = next(q for q in printed["queues"] if q["name"] == v.get_attribute("data-queue"))
        kind, dim = v.get_attribute("data-kind"), v.get_attribute("data-dim")
        assert int(v.text) == queue[kind][dim]
        bar = v.find_element("xpath", "following-sibling::span[contains(@class, 'bar')]")
        expected = 100 * queue[kind][dim] / capacity[dim] if capacity[dim] else 0
        assert _fill(browser, bar) == pytest.approx(expected, abs=1.5)
    _shot(browser, tmp_path, "queues")


def test_a_hostile_pod_name_is_shown_and_not_run(browser: Any, tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    path = _save(tmp_path / "hostile.json", hostile_cluster())
    with serving(path) as url:
        for page in ("/", "/node?name=n1"):
            browser.get(url + page)
            with pytest.raises(NoAlertPresentException):
                browser.switch_to.alert.text  # noqa: B018 (asking is the check)
            assert not browser.find_elements("css selector", "main img, main script")
        assert f"default/{HOSTILE}" in browser.find_element("tag name", "main").text
        _shot(browser, tmp_path, "hostile")


def test_a_new_pod_appears_without_a_reload(
    browser: Any, site: tuple[str, Path], tmp_path: Path
) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    url, path = site
    browser.get(url + "/node?name=gpu-a")
    browser.execute_script("window.sameDocument = true;")  # gone if the page reloads
    snapshot = _cluster()[0]
    added = pod("default/arrived", node="gpu-a", asks={"main": (10, 0)},
                shares={"main": [(1, 10, 1024)]})  # fmt: skip
    _save(path, dataclasses.replace(snapshot, pods=(*snapshot.pods, added)))
    WebDriverWait(browser, 30).until(
        lambda d: "default/arrived" in d.find_element("tag name", "main").text
    )
    assert browser.execute_script("return window.sameDocument === true;")
    assert browser.find_element("tag name", "html").get_attribute("data-live") == "on"
    _shot(browser, tmp_path, "node")


def test_the_page_says_when_its_server_is_gone(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    path = _save(tmp_path / "cluster.json", demo_cluster())
    with serving(path) as url:
        browser.get(url + "/")
        assert "Extender: up" in browser.find_element("id", "status").text
    WebDriverWait(browser, 30).until(
        lambda d: "unreachable" in (d.find_element("id", "status").get_attribute("class") or "")
    )
    assert "cannot be reached" in browser.find_element("id", "status").text


def test_without_javascript_the_tables_and_filters_work(
    site: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = site
    with chromium(javascript=False) as plain:
        plain.get(url + "/")
        html = plain.find_element("tag name", "html")
        assert html.get_attribute("data-live") is None  # the script did not run
        rows = plain.find_elements("css selector", "#grid tr[data-node]")
        assert len(rows) == 4
        box = plain.find_element("name", "q")
        box.send_keys("tf-worker-3")
        box.submit()
        rows = plain.find_elements("css selector", "#grid tr[data-node]")
        assert [r.get_attribute("data-node") for r in rows] == ["gpu-c"]
        assert "q=tf-worker-3" in plain.current_url
        _shot(plain, tmp_path, "no-javascript")


def test_an_update_waits_while_the_keyboard_is_in_the_page(
    browser: Any, site: tuple[str, Path]
) -> None:
    """A keyboard user on a GPU cell keeps the focus: the swap waits until it leaves."""
    from selenium.webdriver.support.ui import WebDriverWait

    url, path = site
    browser.get(url + "/")
    browser.execute_script("document.querySelector('#grid a.gpu').focus();")
    snapshot = _cluster()[0]
    added = pod("default/later", node="gpu-a", asks={"main": (10, 0)},
                shares={"main": [(1, 10, 1024)]})  # fmt: skip
    _save(path, dataclasses.replace(snapshot, pods=(*snapshot.pods, added)))
    status = browser.find_element("id", "status")
    first = status.get_attribute("data-generation")
    WebDriverWait(browser, 30).until(lambda _: status.get_attribute("data-generation") != first)
    assert browser.execute_script("return document.activeElement.matches('#grid a.gpu');")
    assert "default/later" not in browser.find_element("id", "grid").get_attribute("innerHTML")
    browser.execute_script("document.activeElement.blur();")
    WebDriverWait(browser, 30).until(
        lambda d: "default/later" in d.find_element("id", "grid").get_attribute("innerHTML")
    )


def test_with_prometheus_each_gpu_shows_what_is_used_beside_what_is_granted(
    browser: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(tmp_path / "used.json", used_cluster())
    with prometheus_serving(USED_ANSWERS) as prom, serving(path, "--prometheus", prom) as url:
        assert main(["--fake-cluster", str(path), "--prometheus", prom, "-o", "json"]) == 0
        printed = json.loads(capsys.readouterr().out)["nodes"][0]["gpus"]
        browser.get(url + "/")
        cells = browser.find_elements("css selector", "#grid a.gpu")
        assert len(cells) == len(printed) == 3
        for cell, gpu in zip(cells, printed, strict=True):
            use, total = gpu["realUse"], gpu["memoryTotalMiB"]
            if use is None:
                assert cell.find_element("css selector", ".used").text == "used -"
                continue
            busy, memory = cell.find_elements("css selector", ".bar.cu, .bar.mu")
            if use["busyPercent"] is None:
                assert busy.get_attribute("data-used") == "-"
            else:
                assert _fill(browser, busy) == pytest.approx(use["busyPercent"], abs=1.5)
            assert _fill(browser, memory) == pytest.approx(
                100 * use["memoryUsedMiB"] / total, abs=1.5
            )
        cells[0].click()
        text = browser.find_element("tag name", "main").text
        assert "used 3Gi 45%" in text and "2Gi" in text  # the GPU's and its container's use
        _shot(browser, tmp_path, "node-used")


def test_a_waiting_gangs_page_shows_where_the_placement_would_put_it_now(
    browser: Any, site: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = site
    snapshot = _cluster()[0]
    report = build_report(snapshot, (), DEFAULT_NAMES)
    ready = [n.name for n in report.nodes if n.ready]
    planned = where_now(snapshot, DEFAULT_NAMES, "ml/bert-1", ready)
    assert planned is not None and planned.assignments
    browser.get(url + "/")
    browser.find_element("link text", "ml/bert-1").click()
    assert browser.find_element("id", "could-go-h").text == "Where it could go now"
    rows = browser.find_elements("css selector", "table.could-go tbody tr")
    shown = [tuple(td.text for td in r.find_elements("tag name", "td"))[:2] for r in rows]
    assert shown == [(a.pod, a.node) for a in planned.assignments]
    _shot(browser, tmp_path, "pod-could-go")
