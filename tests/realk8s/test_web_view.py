"""The web view against the real API server: `vgpu inspect --serve` as the user bound only to
the shipped ClusterRole vgpu-inspect, in headless Chromium; a pod created on the cluster appears
on the open page without a reload (the page's script swaps in the new data); a waiting gang's
page shows where the placement would put its members now."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Rest
from tests.web.browser import chromium, screenshots, serving
from tests.web.test_where import could_go_rows

pytestmark = pytest.mark.realk8s


@pytest.fixture
def api(real_cluster: RealCluster) -> Iterator[Rest]:
    pods.delete_all(real_cluster.admin)
    yield real_cluster.admin
    pods.delete_all(real_cluster.admin)


def test_a_pod_created_on_the_cluster_appears_without_a_reload(
    real_cluster: RealCluster, api: Rest, tmp_path: Path
) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    kubeconfig = real_cluster.kubeconfig("vgpu-inspect-user")
    with chromium() as browser, serving(None, f"--kubeconfig={kubeconfig}") as url:
        browser.get(url + "/")
        assert "last read failed" not in browser.find_element("id", "status").text
        cells = browser.find_elements("css selector", "#grid a.gpu")
        assert cells, "the test cluster's GPUs are on the page"
        browser.execute_script("window.sameDocument = true;")  # gone if the page reloads
        api.post(pods.PODS, pods.pod("web-seen", pods.container("main", 30, 4)))
        pods.wait_running(api, "web-seen")
        WebDriverWait(browser, 60).until(
            lambda d: any(
                f"{pods.NS}/web-seen" in (c.get_attribute("title") or "")
                for c in d.find_elements("css selector", "#grid a.gpu")
            )
        )
        assert browser.execute_script("return window.sameDocument === true;")
        browser.save_screenshot(str(screenshots(tmp_path) / "realk8s-cluster.png"))


def test_an_incomplete_gangs_page_shows_where_its_waiting_members_could_go(
    real_cluster: RealCluster, api: Rest
) -> None:
    """Two members of a gang of three wait for the third; the pod page plans both on the live
    cluster's GPUs with the core's gang planning, one whole GPU each."""
    labels = {pods.GROUP_NAME: "half", pods.GROUP_MIN: "3"}
    for i in range(2):
        api.post(pods.PODS, pods.pod(f"half-{i}", pods.container("main", 100), labels=labels))
    kubeconfig = real_cluster.kubeconfig("vgpu-inspect-user")
    with serving(None, f"--kubeconfig={kubeconfig}") as url:

        def planned() -> str | None:
            with urllib.request.urlopen(f"{url}/pod?name={pods.NS}/half-1", timeout=30) as r:
                text = r.read().decode()
            return text if 'class="could-go"' in text else None

        page: str = wait_until(planned, 60, "the pod page planning both waiting members")

    rows = [r.split("|") for r in could_go_rows(page)]
    assert sorted(r[0] for r in rows) == [f"{pods.NS}/half-0", f"{pods.NS}/half-1"]
    assert {r[1] for r in rows} <= {"node-a", "node-b"} and all(r[4] == "100" for r in rows)
    assert len({(r[1], r[2]) for r in rows}) == 2, "a GPU of its own each"
