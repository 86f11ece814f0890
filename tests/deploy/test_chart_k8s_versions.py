"""The chart on Kubernetes 1.38 (v1.38.0-beta.0, what the second test-cluster pin runs, and 1.38.0).

From `pkg/features/kube_features.go` of v1.38.0-beta.0: `SchedulerPopFromBackoffQ` still exists
(beta, on), so the flag the chart renders for 1.33 and later is still accepted; the
`DynamicResourceAllocation` gate is gone and `DRAConsumableCapacity` is GA, so DRA mode needs
no gate there either (the chart sets none)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.test_chart import _helm_or_skip, find, render

Obj = dict[str, Any]


@pytest.fixture(autouse=True)
def _needs_helm() -> None:
    _helm_or_skip()


def _scheduler(objs: list[Obj]) -> Obj:
    spec = find(objs, "Deployment", "vgpu-scheduler")["spec"]["template"]["spec"]
    return dict(spec["containers"][0])


def test_kubernetes_1_38_keeps_the_backoff_flag_and_dra_mode() -> None:
    for version in ("v1.38.0-beta.0", "v1.38.0"):
        objs = render(kube_version=version, dra__enabled="true")
        flags = _scheduler(objs)["command"]
        assert "--feature-gates=SchedulerPopFromBackoffQ=false" in flags, version
        assert find(objs, "DaemonSet", "vgpu-dra-driver"), version
        assert not [f for f in flags if "DynamicResourceAllocation" in f]
