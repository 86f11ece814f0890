"""The test cluster rehearses the chart as shipped (`hack/testcluster.sh up DIR --chart`): Helm
installed every vgpu object, so the documented server-side dry run and a real upgrade pass
against it; the chart's queue objects work (a pod of a bound namespace that names no scheduler
and no queue is labelled, gated, released by the leader and placed); `kubectl inspect vgpu
--queues` names the leader and the configuration in force and gives a held pod the leader's
own reason; the agents' metrics are open, and the chart's alerts evaluated over a real scrape
fire nothing (and, without the extender's series, only the alerts saying it is missing)."""

from __future__ import annotations

import json
import math
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.test_alert_rules import Series, alert_rules, fires, steady
from tests.deploy.test_chart import _helm_or_skip
from tests.prometheus_stub import serving
from tests.realk8s import chart_install, pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.nodes import NodeSpec
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Obj
from tests.realk8s.test_admission import _user
from tests.realk8s.test_tenant import POD_EDITOR

pytestmark = pytest.mark.realk8s
CHART = str(chart_install.REPO / "charts" / "vgpu")


@contextmanager
def charted_cluster(binary: Path) -> Iterator[RealCluster]:
    """One node of two A100s, vgpu installed by `helm install` of the chart (skipped without
    .bin/helm); removed afterwards unless VGPU_REALK8S_KEEP=1."""
    _helm_or_skip()
    root = Path(tempfile.mkdtemp(prefix="vk8s-chart-"))
    cluster = RealCluster(root, binary, [NodeSpec("node-a", "2xA100-SXM4-80GB")], chart=True)
    try:
        yield cluster.up()
    finally:
        cluster.down()
        if os.environ.get("VGPU_REALK8S_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def charted(realk8s_binary: Path) -> Iterator[RealCluster]:
    with charted_cluster(realk8s_binary) as cluster:
        yield cluster


def _helm(cluster: RealCluster, *args: str) -> str:
    return chart_install.helm(cluster.kubeconfig("admin"), *args)


def test_helm_owns_the_install_and_its_dry_run_and_upgrade_pass(charted: RealCluster) -> None:
    status = json.loads(_helm(charted, "status", "vgpu", "-n", "vgpu-system", "-o", "json"))
    assert status["info"]["status"] == "deployed"
    again = ("vgpu", CHART, "-n", "vgpu-system", "--reuse-values")
    _helm(charted, "upgrade", "--install", *again, "--dry-run=server")
    _helm(charted, "upgrade", *again)
    status = json.loads(_helm(charted, "status", "vgpu", "-n", "vgpu-system", "-o", "json"))
    assert (status["version"], status["info"]["status"]) == (2, "deployed")


def _pod(name: str, namespace: str, cores: int) -> Obj:
    """A vGPU pod as a third-party chart writes it: no schedulerName, no queue label."""
    obj = pods.pod(name, pods.container("main", cores))
    del obj["spec"]["schedulerName"]
    obj["metadata"]["namespace"] = namespace
    return obj


def _get(cluster: RealCluster, namespace: str, name: str) -> Obj:
    return cluster.admin.get(f"/api/v1/namespaces/{namespace}/pods/{name}")


def _policies_in_effect(cluster: RealCluster, namespace: str) -> None:
    """Wait until the API server applies the chart's mutating policies to a new pod (a dry-run
    create): it loads policies asynchronously after they are written."""
    path = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"
    wait_until(
        lambda: "vgpu.io/queue" in (cluster.admin.post(path, _pod("probe", namespace, 10))
                                    ["metadata"].get("labels") or {}),
        60, "the chart's mutating policies to be in effect",
    )  # fmt: skip


def test_the_charts_queue_objects_hold_release_and_place_a_pod(charted: RealCluster) -> None:
    _policies_in_effect(charted, "team-a")
    created = charted.admin.post("/api/v1/namespaces/team-a/pods", _pod("a0", "team-a", 100))
    assert created["metadata"]["labels"]["vgpu.io/queue"] == "team-a"
    assert {"name": "vgpu.io/queue"} in created["spec"]["schedulingGates"]
    assert created["spec"]["schedulerName"] == "vgpu-scheduler"
    placed = wait_until(
        lambda: (p := _get(charted, "team-a", "a0"))["spec"].get("nodeName") and p,
        60, "the leader to release a0 and the scheduler to place it",
    )  # fmt: skip
    assert placed["spec"]["nodeName"] == "node-a" and not placed["spec"].get("schedulingGates")


def test_a_teams_pod_editor_cannot_skip_its_queue_by_naming_no_scheduler(
    charted: RealCluster,
) -> None:
    """From the tenant's side (a ServiceAccount that may only edit pods in team-a): a vGPU pod
    naming no scheduler is handed to vgpu-scheduler and, whichever mutating policy runs first,
    labelled with team-a's queue and gated; a label naming team-b's queue is overwritten with
    the namespace's."""
    _policies_in_effect(charted, "team-a")
    editor = _user(charted, "team-a-editor", POD_EDITOR, ns="team-a")
    try:
        created = editor.post("/api/v1/namespaces/team-a/pods", _pod("t0", "team-a", 100))
        assert created["spec"]["schedulerName"] == "vgpu-scheduler"
        assert created["metadata"]["labels"]["vgpu.io/queue"] == "team-a"
        assert {"name": "vgpu.io/queue"} in created["spec"]["schedulingGates"]
        other = _pod("t1", "team-a", 100)
        other["metadata"]["labels"] = {"vgpu.io/queue": "team-b"}
        asked = editor.post("/api/v1/namespaces/team-a/pods", other)
        assert asked["metadata"]["labels"]["vgpu.io/queue"] == "team-a"
        assert {"name": "vgpu.io/queue"} in asked["spec"]["schedulingGates"]
    finally:
        editor.close()
        for name in ("t0", "t1"):
            try:
                charted.admin.delete(f"/api/v1/namespaces/team-a/pods/{name}")
            except ApiError as err:
                if err.status != 404:
                    raise


def _inspect(cluster: RealCluster, *args: str) -> Any:
    argv = [sys.executable, "-m", "vgpu", "inspect", "--kubeconfig",
            str(cluster.kubeconfig("vgpu-inspect-user")), "--queues", "-o", "json", *args]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_inspect_names_the_leader_and_gives_a_held_pod_the_leaders_reason(
    charted: RealCluster,
) -> None:
    # a0 holds one of the two GPUs: b0, asking both, does not fit whole
    _policies_in_effect(charted, "team-b")
    charted.admin.post("/api/v1/namespaces/team-b/pods", _pod("b0", "team-b", 200))
    report = wait_until(
        lambda: (r := _inspect(charted))["held"] and r["held"][0]["source"] == "leader" and r,
        60, "the leader's VgpuQueued reason on b0",
    )  # fmt: skip
    assert report["leader"] == "extender-0" and report["inForce"] == "configmap"
    assert [q["name"] for q in report["queues"]] == list(chart_install.QUEUES)
    (held,) = report["held"]
    assert held["pod"] == "team-b/b0" and "does not fit" in held["why"], held


def test_the_agents_metrics_are_open(charted: RealCluster) -> None:
    (flag,) = [f for f in charted.nodes["node-a"].agent_flags if f.startswith("--metrics-port=")]
    url = f"http://127.0.0.1:{flag.split('=', 1)[1]}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert b"vgpu_gpu_info" in reply.read()


def _scrape(cluster: RealCluster) -> dict[str, str]:
    """The leading extender's and each agent's /metrics, as Prometheus would scrape them."""
    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    url = f"https://127.0.0.1:{cluster.ports['extender']}/metrics"
    with urllib.request.urlopen(url, context=context, timeout=10) as reply:
        texts = {"extender": reply.read().decode()}
    for name, spec in cluster.nodes.items():
        (flag,) = [f for f in spec.agent_flags if f.startswith("--metrics-port=")]
        agent = f"http://127.0.0.1:{flag.split('=', 1)[1]}/metrics"
        with urllib.request.urlopen(agent, timeout=10) as reply:
            texts[f"agent-{name}"] = reply.read().decode()
    return texts


def _series(texts: list[str], minutes: int = 40) -> Series:
    """Every sample held steady for `minutes` (a settled cluster: counters do not move)."""
    out: Series = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if not math.isfinite(s.value):
                    continue
                labels = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = steady(s.value, minutes)
    return out


def test_the_charts_alerts_fire_nothing_on_a_real_scrape_and_only_the_extenders_without_it(
    charted: RealCluster,
) -> None:
    """The chart's own rules, by Prometheus's engine (`.bin/promql`), over what this cluster
    exports: silent while it is healthy; with the extender's series gone, only the alerts that
    say the extender is missing."""
    _helm_or_skip("promql")
    texts = _scrape(charted)
    healthy = _series(list(texts.values()))
    assert any(k.startswith("vgpu_extender_binding_ready") for k in healthy)
    assert any(k.startswith("vgpu_gpu_memory_capacity_bytes") for k in healthy)
    assert [a for a in alert_rules() if fires(a, healthy)] == []
    without = _series([t for who, t in texts.items() if who != "extender"])
    fired = {a for a in alert_rules() if fires(a, without)}
    assert fired == {"VgpuExtenderNotReady", "VgpuExtenderNoLeader"}


def _answers(text: str) -> dict[str, Any]:
    """What a Prometheus scraping `text` answers to the report's queries (every sample fresh:
    the age query answers 0 s)."""
    from vgpu.inspect.real_use import AGE_QUERY, QUERIES

    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    def vector(name: str, value: Any = None) -> dict[str, Any]:
        result = [
            {"metric": dict(s.labels), "value": [0, str(s.value if value is None else value)]}
            for s in samples
            if s.name == name
        ]
        return {"status": "success", "data": {"resultType": "vector", "result": result}}

    answers = {q: vector(q) for q in QUERIES if q != AGE_QUERY}
    answers[AGE_QUERY] = vector("vgpu_gpu_memory_used_bytes", 0)
    return answers


def test_inspect_shows_the_agents_real_use_for_the_gpus_it_reports(charted: RealCluster) -> None:
    """The agent's series name the GPUs by the UUIDs the report shows: every GPU gets a
    real-use figure, from a Prometheus answering with what the agent exports."""
    answers = _answers(_scrape(charted)["agent-node-a"])
    with serving(answers) as url:
        argv = [sys.executable, "-m", "vgpu", "inspect", "-o", "json", "--kubeconfig",
                str(charted.kubeconfig("vgpu-inspect-user")), "--prometheus", url]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    doc = json.loads(done.stdout)
    assert doc["realUse"]["problem"] == ""
    gpus = [g for n in doc["nodes"] for g in n["gpus"]]
    assert gpus and all(g["realUse"] is not None for g in gpus), gpus
    assert all(g["realUse"]["stale"] is False for g in gpus)
