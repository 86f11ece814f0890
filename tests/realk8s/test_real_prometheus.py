"""A real Prometheus server (built from its published module: `bash hack/build-prometheus.sh`,
opt-in) scrapes the test cluster as the chart installs it: the leading extender's /metrics over
TLS and each node agent's. `vgpu inspect --prometheus` and the web view then read REAL USE and
the queues' share over time from it, not from a stand-in answering what we expect: every GPU's
figure is the one its agent exports (the fake GPUs use none: 0), and the queue chart is the
extender's own series. Skipped without `.bin/prometheus`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.realk8s import chart_install
from tests.realk8s.binary import GO_MODULE
from tests.realk8s.cluster import RealCluster
from tests.realk8s.processes import free_port, wait_until
from tests.realk8s.test_chart_install import _scrape, charted_cluster
from tests.web.browser import serving
from vgpu.adapters.prometheus import instant, query_range
from vgpu.inspect.web.shares import LEADER_SHARE, STEP_S

pytestmark = pytest.mark.realk8s
PROMETHEUS = GO_MODULE.parents[1] / ".bin" / "prometheus"


@pytest.fixture(scope="module")
def charted(realk8s_binary: Path) -> Iterator[RealCluster]:
    if not PROMETHEUS.is_file():
        pytest.skip("no .bin/prometheus: build it with `bash hack/build-prometheus.sh` (opt-in)")
    with charted_cluster(realk8s_binary) as cluster:
        yield cluster


def _config(cluster: RealCluster) -> str:
    """Every second: the extender (HTTPS, the cluster's CA) and each agent's metrics port."""
    agents = [
        f"127.0.0.1:{f.split('=', 1)[1]}"
        for spec in cluster.nodes.values()
        for f in spec.agent_flags
        if f.startswith("--metrics-port=")
    ]
    return json.dumps({  # YAML is a superset of JSON
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "vgpu-extender", "scheme": "https",
             "tls_config": {"ca_file": str(cluster.pki / "ca.crt")},
             "static_configs": [{"targets": [f"127.0.0.1:{cluster.ports['extender']}"]}]},
            {"job_name": "vgpu-node-agent", "static_configs": [{"targets": agents}]},
        ],
    })  # fmt: skip


@pytest.fixture(scope="module")
def prometheus(charted: RealCluster) -> Iterator[str]:
    """The real server scraping `charted`, once every target is up; its URL."""
    folder = charted.root / "prometheus"
    folder.mkdir(exist_ok=True)
    (folder / "prometheus.yml").write_text(_config(charted))
    port = free_port()
    log = (folder / "prometheus.log").open("w")
    process = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={folder / 'prometheus.yml'}",
         f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    alive = (folder / "prometheus.log", lambda: process.poll() is None)
    try:
        wait_until(lambda: _up(url) == (1 + len(charted.nodes)), 60, "every target up", alive)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _up(url: str) -> int:
    result = instant(url, "up == 1")["data"]["result"]
    return len(result)


def _agent_memory(cluster: RealCluster) -> dict[str, float]:
    """Each GPU's memory in use in MiB, as its agent exports it."""
    out = {}
    for who, text in _scrape(cluster).items():
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if who.startswith("agent-") and s.name == "vgpu_gpu_memory_used_bytes":
                    out[s.labels["gpu"]] = s.value / (1024 * 1024)
    return out


def test_inspect_reads_each_gpus_real_use_from_a_real_prometheus(
    charted: RealCluster, prometheus: str
) -> None:
    exported = _agent_memory(charted)
    argv = [sys.executable, "-m", "vgpu", "inspect", "-o", "json", "--kubeconfig",
            str(charted.kubeconfig("vgpu-inspect-user")), "--prometheus", prometheus]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    doc = json.loads(done.stdout)
    assert doc["realUse"]["problem"] == "", doc["realUse"]
    gpus = {g["uuid"]: g["realUse"] for n in doc["nodes"] for g in n["gpus"]}
    assert gpus and set(gpus) == set(exported), (gpus, exported)
    for uuid, use in gpus.items():
        assert use is not None and use["stale"] is False, (uuid, use)
        assert use["memoryUsedMiB"] == pytest.approx(exported[uuid], abs=0.1), (uuid, use)


def test_the_web_view_draws_real_use_and_the_queues_history_from_a_real_prometheus(
    charted: RealCluster, prometheus: str
) -> None:
    """The range query the view runs answers two steps or more of both queues (the server has
    scraped for a minute), then the pages show the real figures and the extender's series."""

    def history() -> bool:
        now = time.time()
        series = query_range(prometheus, LEADER_SHARE, now - 3600, now, STEP_S)
        queues = {labels.get("queue"): len(points) for labels, points in series}
        return set(chart_install.QUEUES) <= set(queues) and min(queues.values()) >= 2

    wait_until(history, 150, "two steps of vgpu_extender_queue_share in Prometheus")
    kubeconfig = charted.kubeconfig("vgpu-inspect-user")
    with serving(None, f"--kubeconfig={kubeconfig}", f"--prometheus={prometheus}") as url:
        grid = urllib.request.urlopen(url + "/", timeout=30).read().decode()
        queues = urllib.request.urlopen(url + "/queues", timeout=30).read().decode()
    assert f"Real use (REAL USE: GPU memory in use, busy %) from {prometheus}" in grid
    assert grid.count('class="bar mu"') == 2 and 'class="used none"' not in grid, grid
    source = f"From the extender&#x27;s vgpu_extender_queue_share in Prometheus ({prometheus})."
    assert source in queues, queues
    assert 'id="share-chart"' in queues
    for queue in chart_install.QUEUES:
        assert f"<title>{queue}</title></polyline>" in queues
