"""The web view against the real API server: `vgpu inspect --serve` as the user bound only to
the shipped ClusterRole vgpu-inspect, in headless Chromium; a pod created on the cluster appears
on the open page without a reload (the page's script swaps in the new data)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.rest import Rest
from tests.web.browser import chromium, screenshots, serving

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
