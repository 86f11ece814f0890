"""The CPU and memory a pod asks, counted as kube-scheduler counts them
(k8s.io/component-helpers/resource/helpers.go, `PodRequests`): app containers and restartable
("sidecar") init containers add up; a regular init container runs next to the sidecars started
before it, so it needs its own request plus theirs; the pod needs the larger of the two, plus
its overhead. The extender once ignored sidecars (a 1-CPU sidecar next to a 2-CPU app counted
2 CPUs), so it could charge and plan a pod for less than the node gives it."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.api.podspec import pod_spec


def _c(name: str, cpu: str, mem: str = "0", sidecar: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": {"cpu": cpu, "memory": mem}}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def _asks(init: list[dict[str, Any]], app: list[dict[str, Any]]) -> tuple[int, int]:
    pod = {"metadata": {"name": "p"}, "spec": {"initContainers": init, "containers": app}}
    req = pod_spec(pod, memory_unit_mib=256).request
    return req.cpu_milli, req.memory_mib


@pytest.mark.parametrize(
    ("init", "app", "expected"),
    [
        ([], [_c("a", "2", "1Gi"), _c("b", "1", "1Gi")], (3000, 2048)),
        ([_c("proxy", "1", "512Mi", sidecar=True)], [_c("a", "2", "1Gi")], (3000, 1536)),
        ([_c("proxy", "1", sidecar=True), _c("setup", "4")], [_c("a", "2")], (5000, 0)),
        ([_c("setup", "4"), _c("proxy", "1", sidecar=True)], [_c("a", "2")], (4000, 0)),
        ([_c("setup", "4"), _c("proxy", "1", sidecar=True)], [_c("a", "3500m")], (4500, 0)),
        ([_c("s1", "1", sidecar=True), _c("s2", "1", sidecar=True)], [], (2000, 0)),
    ],
)
def test_sidecars_count_as_kube_scheduler_counts_them(
    init: list[dict[str, Any]], app: list[dict[str, Any]], expected: tuple[int, int]
) -> None:
    assert _asks(init, app) == expected
