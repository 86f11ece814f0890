"""REAL USE: each GPU's memory in use and busy %, as the agents export them, read from
Prometheus with `--prometheus`; "-" where no figure, marked stale when old, and the same in the
table, -d and -o json. An unreachable Prometheus costs the column, never the report."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.inspect.builders import gpu_uuid, node, pod
from tests.prometheus_stub import serving
from vgpu.inspect.build import build_report
from vgpu.inspect.cli import main
from vgpu.inspect.details import render_details
from vgpu.inspect.export import report_document
from vgpu.inspect.real_use import (
    AGE_QUERY,
    BUSY_QUERY,
    CONTAINER_QUERY,
    MEMORY_QUERY,
    from_answers,
)
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.table import render_table

T4 = ("Tesla T4", 15360)
G0, G1, G2 = (gpu_uuid("n1", i) for i in range(3))


def _vector(values: Mapping[str, float], **labels: str) -> dict[str, Any]:
    result = [
        {"metric": {"gpu": g, "node": "n1"} | labels, "value": [1.0, str(v)]}
        for g, v in values.items()
    ]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


ANSWERS = {
    MEMORY_QUERY: _vector({G0: 3 * 1024**3, G1: 512 * 1024**2}),
    BUSY_QUERY: _vector({G0: 0.45, G1: 0.0}),
    AGE_QUERY: _vector({G0: 12.0, G1: 600.0}),
    CONTAINER_QUERY: _vector({G0: 2 * 1024**3}, namespace="t", pod="p", container="main"),
}


def _report(answers: Mapping[str, Any] = ANSWERS) -> Any:
    holder = pod("t/p", node="n1", shares={"main": [(0, 50, 8192)]})
    report = build_report(Snapshot((node("n1", [T4] * 3),), (holder,)), ())
    return dataclasses.replace(report, real_use=from_answers("prom", answers))


def test_each_gpu_shows_memory_in_use_and_busy_percent_or_a_dash() -> None:
    text = render_table(_report())
    header, row = text.splitlines()[:2]
    assert header.rstrip().endswith("REAL USE")
    assert row.rstrip().endswith("3Gi 45%, 512Mi 0% (stale 600s), -")
    assert "Real use (REAL USE: GPU memory in use, busy %) from prom" in text


def test_details_and_json_carry_the_same_figures() -> None:
    report = _report()
    details = render_details(report)
    assert "3Gi 45%" in details and "512Mi 0% (stale 600s)" in details
    gpus = report_document(report)["nodes"][0]["gpus"]
    assert gpus[0]["realUse"] == {"memoryUsedMiB": 3072.0, "busyPercent": 45.0,
                                  "ageSeconds": 12.0, "stale": False}  # fmt: skip
    assert gpus[1]["realUse"]["stale"] is True and gpus[2]["realUse"] is None
    assert gpus[0]["holders"][0]["realMemoryUsedMiB"] == 2048.0


def test_details_show_each_containers_memory_in_use_beside_its_grant() -> None:
    (holder,) = [line for line in render_details(_report()).splitlines() if "t/p [main]" in line]
    assert holder.split()[-4:] == ["50", "8Gi", "admitted", "2Gi"]


def test_without_the_flag_nothing_changes() -> None:
    report = build_report(Snapshot((node("n1", [T4]),), ()), ())
    assert "REAL USE" not in render_table(report) and "REAL USE" not in render_details(report)
    assert "realUse" not in json.dumps(report_document(report))


def test_a_prometheus_error_is_one_line_and_every_gpu_shows_a_dash() -> None:
    failed = {q: {"status": "error", "error": "bad_data"} for q in ANSWERS}
    text = render_table(_report(failed))
    assert "Real use: not known (Prometheus did not answer" in text and "bad_data" in text
    assert text.splitlines()[1].rstrip().endswith("-, -, -")


@pytest.fixture
def prometheus() -> Iterator[str]:
    """A Prometheus query API answering `ANSWERS`."""
    with serving(ANSWERS) as url:
        yield url


def _saved(tmp_path: Path) -> Path:
    path = tmp_path / "c.json"
    doc = {"apiVersion": "vgpu.io/v1alpha1", "kind": "ClusterSnapshot",
           "nodes": [node("n1", [T4] * 3)], "pods": []}  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


def test_the_command_line_asks_prometheus(
    tmp_path: Path, prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--fake-cluster", str(_saved(tmp_path)), "--prometheus", prometheus, "--width", "0"]
    assert main(argv) == 0
    assert "3Gi 45%, 512Mi 0% (stale 600s), -" in capsys.readouterr().out
    assert main([*argv, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["nodes"][0]["gpus"][0]["realUse"]["busyPercent"] == 45.0


def test_an_unreachable_prometheus_still_gives_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--fake-cluster", str(_saved(tmp_path)), "--prometheus", "http://127.0.0.1:9"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Real use: not known (cannot ask http://127.0.0.1:9" in out and "n1" in out
