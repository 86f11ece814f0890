"""`kubectl inspect vgpu -n NAMESPACE`: only that namespace's pods are named, and every total
stays the cluster's (a GPU is shared across namespaces)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.build import build_report
from vgpu.inspect.cli import main
from vgpu.inspect.lease import parse_time
from vgpu.inspect.model import Report
from vgpu.inspect.namespace import OTHERS, only_namespace
from vgpu.inspect.snapshot import loads

CLUSTER = Path(__file__).parents[2] / "examples" / "cluster-snapshot.yaml"
SNAPSHOT = loads(CLUSTER.read_text(encoding="utf-8"), source=str(CLUSTER))
REPORT = build_report(SNAPSHOT, [], DEFAULT_NAMES, now=parse_time(SNAPSHOT.taken_at))


def _sums(report: Report) -> list[tuple[int, int, bool]]:
    """Per GPU: cores and memory held, and whether any holder is pending."""
    return [
        (g.cores_used, g.memory_used_mmib, any(not h.admitted for h in g.holders))
        for n in report.nodes
        for g in n.gpus
    ]


@given(st.sampled_from(["default", "ml", "kube-system", "ml2", ""]))
def test_only_the_namespaces_pods_are_named_and_every_sum_is_kept(namespace: str) -> None:
    narrowed = only_namespace(REPORT, namespace)
    assert _sums(narrowed) == _sums(REPORT)
    assert narrowed.totals == REPORT.totals
    assert [n.usage for n in narrowed.nodes] == [n.usage for n in REPORT.nodes]
    named = [h.pod for n in narrowed.nodes for g in n.gpus for h in g.holders]
    named += [u.pod for u in narrowed.unscheduled] + [g.key for g in narrowed.gangs]
    named += [p.subject for p in narrowed.problems if "/" in p.subject]
    assert all(k == OTHERS or k.startswith(f"{namespace}/") for k in named)
    node_problems = [p for p in REPORT.problems if "/" not in p.subject]
    assert [p for p in narrowed.problems if "/" not in p.subject] == node_problems


def test_the_flag_narrows_the_details(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--fake-cluster", str(CLUSTER), "-d", "-n", "default"]) == 0
    out = capsys.readouterr().out
    assert "default/infer-1 [main]" in out and "default/h100" in out
    assert "ml/" not in out
    assert f"{OTHERS} [1 container]" in out
    assert "total: cores 300/400 (75%)" in out  # gpu-b: only ml pods, all counted
