"""The table's footer speaks of one waiting pod in the singular."""

from __future__ import annotations

import dataclasses

from tests.inspect.scenario import demo_cluster
from vgpu.inspect.build import build_report
from vgpu.inspect.table import render_table


def test_one_unscheduled_pod_is_counted_in_the_singular() -> None:
    report = build_report(demo_cluster())
    assert len(report.unscheduled) > 1
    one = dataclasses.replace(report, unscheduled=report.unscheduled[:1])
    assert "Unscheduled: 1 pod asks for vgpu and waits for a node" in render_table(one)
    assert f"Unscheduled: {len(report.unscheduled)} pods ask for vgpu" in render_table(report)
