"""Alerts, dashboard and docs name only metrics the code exports, and docs name all of them.

The exported names are read from the code itself (an AST scan of every metric constructor in
vgpu/), so renaming a metric without fixing the chart's alerts, the dashboard and
docs/monitoring.md fails here. tests/node and tests/extender check that the daemons serve them.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_chart import _helm_or_skip, render

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack"))
import chart  # noqa: E402

CHART = ROOT / "charts" / "vgpu"
COUNTERS = {"Counter", "PromCounter", "CounterMetricFamily"}
HISTOGRAMS = {"Histogram"}
METRIC_CALLS = COUNTERS | HISTOGRAMS | {"Gauge", "GaugeMetricFamily"}
NAME = re.compile(r"\bvgpu_[a-z0-9_]+\b")


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _first_str(node: ast.Call) -> str | None:
    if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


@functools.cache
def exported() -> dict[str, str]:
    """Metric family name -> kind (counter, histogram, gauge), from every module in vgpu/
    (parsed once per run: the checks below ask for it once per documented name)."""
    found: dict[str, str] = {}
    for path in (ROOT / "vgpu").rglob("*.py"):
        tree = ast.parse(path.read_text())
        helpers: dict[str, tuple[str, str]] = {}  # def f(x): return Metric(f"prefix{x}", ...)
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                for call in ast.walk(fn):
                    if isinstance(call, ast.Call) and _call_name(call) in METRIC_CALLS:
                        arg = call.args[0] if call.args else None
                        if isinstance(arg, ast.JoinedStr) and isinstance(
                            arg.values[0], ast.Constant
                        ):
                            helpers[fn.name] = (str(arg.values[0].value), _call_name(call))
                        elif isinstance(arg, ast.Name) and fn.args.args[:1]:
                            helpers[fn.name] = ("", _call_name(call))
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            name, text = _call_name(call), _first_str(call)
            if text is None:
                continue
            if name in METRIC_CALLS and text.startswith("vgpu_"):
                kind = name
            elif name in helpers:
                prefix, kind = helpers[name]
                text = prefix + text
            else:
                continue
            kind = "counter" if kind in COUNTERS else "histogram" if kind in HISTOGRAMS else "gauge"
            if text.startswith("vgpu_"):
                found[text] = kind
    return found


def series(family: str, kind: str) -> set[str]:
    """The names Prometheus stores for one family (client_python's conventions)."""
    if kind == "counter":  # client_python adds _total unless the name has it already
        return {family.removesuffix("_total") + "_total"}
    if kind == "histogram":
        return {family + s for s in ("_bucket", "_sum", "_count")}
    return {family}


def all_series() -> set[str]:
    return {s for family, kind in exported().items() for s in series(family, kind)}


def rules() -> list[dict[str, Any]]:
    text = (CHART / "templates" / "monitoring" / "prometheusrule.yaml").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("{{-"))
    body = re.sub(r"\{\{[^`]*?\}\}", "1", body.replace("{{`", "").replace("`}}", ""))
    doc = yaml.safe_load(body)
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    dash = json.loads((CHART / "dashboards" / "vgpu.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def test_the_scan_finds_both_daemons_metrics() -> None:
    found = exported()
    assert found["vgpu_node_allocations"] == "counter"
    assert found["vgpu_extender_request_seconds"] == "histogram"
    assert found["vgpu_container_gpu_memory_over_grant_bytes"] == "gauge"
    assert found["vgpu_extender_leader"] == "gauge"
    assert len(found) >= 25


@pytest.mark.parametrize("where", ["alerts", "dashboard"])
def test_alerts_and_dashboard_use_only_exported_series(where: str) -> None:
    exprs = [r["expr"] for r in rules()] if where == "alerts" else dashboard_exprs()
    used = {name for expr in exprs for name in NAME.findall(str(expr))}
    assert used, where
    assert used - all_series() == set()


def test_alerts_cover_what_an_operator_must_hear_about() -> None:
    by_name = {r["alert"]: r for r in rules()}
    must = {
        "VgpuGpuUnhealthy": "vgpu_gpu_healthy",
        "VgpuAdmissionRefusals": 'vgpu_node_allocations_total{outcome="refused"}',
        "VgpuExtenderNotReady": "vgpu_extender_binding_ready",
        "VgpuBindLatencyHigh": 'vgpu_extender_request_seconds_bucket{verb="bind"}',
        "VgpuExtenderLeaderStale": "vgpu_extender_leader",
        "VgpuContainerOverGrant": "vgpu_container_gpu_memory_over_grant_bytes",
    }
    for alert, needle in must.items():
        assert needle in str(by_name[alert]["expr"]), alert
    for rule in by_name.values():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_dashboard_shows_grants_use_latency_refusals_and_gangs() -> None:
    dash = json.loads((CHART / "dashboards" / "vgpu.json").read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    text = " ".join(dashboard_exprs())
    for name in (
        "vgpu_gpu_cores_allocated_ratio",
        "vgpu_gpu_utilization_ratio",
        "vgpu_gpu_memory_allocated_bytes",
        "vgpu_gpu_memory_used_bytes",
        "vgpu_extender_assumed",
        "vgpu_extender_pending_containers",
        "vgpu_extender_request_seconds_bucket",
        "vgpu_node_allocations_total",
        "vgpu_extender_gangs",
    ):
        assert name in text, name


def test_every_exported_metric_is_documented() -> None:
    docs = (ROOT / "docs" / "monitoring.md").read_text()
    documented = set(re.findall(r"`(vgpu_[a-z0-9_]+)`", docs))
    missing = {
        family
        for family, kind in exported().items()
        if not (series(family, kind) | {family}) & documented
    }
    assert missing == set()
    stale = {
        name
        for name in documented
        if name not in all_series() and name not in exported() and not name.endswith("_")
    }
    assert stale == set()


def test_the_documented_extender_metrics_port_is_the_charts() -> None:
    """docs/monitoring.md once said 8080 while the chart served 8443."""
    docs = (ROOT / "docs" / "monitoring.md").read_text()
    section = docs.split("## Extender metrics", 1)[1].split("|", 1)[0]
    port = yaml.safe_load((CHART / "values.yaml").read_text())["extender"]["port"]
    assert set(re.findall(r"\b(\d{4})\b", section)) == {str(port)}


def test_every_query_parses_as_promql_and_a_broken_one_is_caught() -> None:
    """Prometheus's own parser (hack/tools/promql, built by hack/build-tools.sh) on every alert
    and dashboard expression; `hack/chart.py ci` runs the same check on the rendered rules."""
    _helm_or_skip("promql")
    exprs = [str(r["expr"]) for r in rules()] + dashboard_exprs()
    exprs = [e.replace("$__rate_interval", "5m").replace("$node", ".*") for e in exprs]
    assert chart.check_promql(exprs).endswith("0 invalid")
    with pytest.raises(chart.ChartError, match="unclosed left parenthesis"):
        chart.check_promql(["sum(rate(vgpu_node_allocations_total[5m])"])


def test_strict_decoding_catches_an_unknown_field_and_a_wrong_type(tmp_path: Path) -> None:
    """hack/tools/strictkinds, which `hack/chart.py ci` runs on every render and daemonset/."""
    _helm_or_skip("strictkinds")
    good = sorted((ROOT / "daemonset" / "scheduler").glob("*config*.yaml"))
    assert chart.check_strict(good).endswith(f"{len(good)} objects decoded strictly, 0 problems")
    monitor = tmp_path / "monitor.yaml"
    monitor.write_text(
        "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\n"
        "spec: {selector: {}, endpoints: [{port: m, intervall: 30s}]}\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(good[0].read_text().replace("httpTimeout: 10s", "httpTimeout: 10"))
    with pytest.raises(chart.ChartError, match='unknown field "intervall"'):
        chart.check_strict([monitor])
    with pytest.raises(chart.ChartError, match="httpTimeout"):
        chart.check_strict([config])


def test_alerts_whose_metrics_the_network_policy_blocks_are_refused_at_render() -> None:
    """With the chart's defaults (NetworkPolicy on, no scraper named) Prometheus cannot reach the
    extender, and VgpuExtenderNotReady and VgpuExtenderNoLeader fired critical on a healthy
    cluster; the render is refused in one line saying what to set."""
    _helm_or_skip()
    with pytest.raises(chart.ChartError) as refused:
        render(metrics__prometheusRule__enabled="true")
    (line,) = [x for x in str(refused.value).splitlines() if "admits no scraper" in x]
    assert "set networkPolicy.metricsFrom" in line
    scraped = render(
        metrics__prometheusRule__enabled="true",
        **{"networkPolicy__metricsFrom[0]__podSelector__matchLabels__app": "prometheus"},
    )
    unguarded = render(metrics__prometheusRule__enabled="true", networkPolicy__enabled="false")
    for objs in (scraped, unguarded):
        assert [o for o in objs if o["kind"] == "PrometheusRule"]
