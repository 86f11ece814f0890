"""Running vGPU pods stay quiet, and a pod the extender rejects is retried only as backoff allows.

With ResourceHealthStatus on (the default since 1.36) the kubelet lists every device ID of a
container in `allocatedResourcesStatus`, in Go map order (`UpdateAllocatedResourcesStatus` in
pkg/kubelet/cm/devicemanager/manager.go), so a vGPU container's list changes order at every
pod sync and the status manager writes it. kube-scheduler re-queues a pod an extender rejected
on any cluster event, and with SchedulerPopFromBackoffQ it tries it at once when idle
(docs/operations.md, "Status writes and retries"). Here both kubelets run as an operator
runs them: the kubelet's default syncFrequency, with daemonset/kubelet's drop-in; and
vgpu-scheduler with the chart's flags. Over two minutes the running pods' statuses must not
be written at all, and each rejected pod tried no more often than its backoff allows.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import REPO, RealCluster
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Obj, Rest
from tests.realk8s.watch import watch_pods

# Two minutes: each pod's worker resyncs within 1.5 x the default syncFrequency of 1 min
# (`wait.Jitter(resyncInterval, 0.5)` in pkg/kubelet/pod_workers.go), so every running pod is
# synced at least once in the window, which writes its status when its device list churns.
WINDOW_S = 120
# Every pod's status is written once more at the kubelet's first resync after it runs (within
# 1.5 x the default syncFrequency of 1 min): pod-level `status.resources`, derived from the spec
# while the API's copy is not yet Running and from the pod's cgroups after
# (`convertToAPIPodLevelResourcesStatus` in pkg/kubelet/kubelet_pods.go, 1.36+), whatever the
# pod asks. The window starts after it: what it measures is a running pod's steady state.
SETTLE_S = 95
SHARES = 20
DROPINS = REPO / "daemonset" / "kubelet"
# kube-scheduler's defaults (podInitialBackoffSeconds, podMaxBackoffSeconds)
INITIAL_BACKOFF_S, MAX_BACKOFF_S = 1.0, 10.0


def backoff_attempts(seconds: float) -> int:
    """Attempts within `seconds` of a pod retried the moment each backoff ends: the most
    kube-scheduler's backoff (pkg/scheduler/backend/queue/backoff_queue.go,
    calculateBackoffDuration) gives a pod its own filters reject."""
    attempts, at = 1, 0.0
    while True:
        at += min(INITIAL_BACKOFF_S * 2 ** (attempts - 1), MAX_BACKOFF_S)
        if at > seconds:
            return attempts
        attempts += 1


def test_backoff_bound_follows_kube_schedulers_doubling() -> None:
    assert [backoff_attempts(s) for s in (0.5, 1, 3, 7, 15, 25, 180)] == [1, 2, 3, 4, 5, 6, 21]


@pytest.fixture
def operator_nodes(real_cluster: RealCluster) -> Iterator[RealCluster]:
    """Both kubelets restarted with the default syncFrequency and vgpu's drop-in; restored
    (with the tier's own settings) afterwards."""
    pods.delete_all(real_cluster.admin)
    tier = dict(real_cluster.nodes)
    try:
        for spec in tier.values():
            real_cluster.restart_node(
                dataclasses.replace(spec, sync_frequency=None, kubelet_dropins=DROPINS)
            )
        yield real_cluster
    finally:
        pods.delete_all(real_cluster.admin)
        for spec in tier.values():
            real_cluster.restart_node(spec)


def _attempts(log: Path, name: str) -> int:
    """kube-scheduler's failed attempts at a pod so far (one line each at --v=2)."""
    mark = f'pod="{pods.NS}/{name}"'
    return sum(
        1
        for line in log.read_text(errors="replace").splitlines()
        if mark in line and ("Unable to schedule pod" in line or "Error scheduling pod" in line)
    )


def _ready(api: Rest, name: str) -> bool:
    conditions = pods.get(api, name)["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _rejected() -> dict[str, Obj]:
    """Two pods the extender rejects and one that kube-scheduler's own filters reject."""
    wrong_type = pods.pod(
        "reject-gpu-type",
        pods.container("main", 10, 2),
        annotations={"vgpu.io/gpu-type": "H100"},  # the nodes have A100s only
    )
    too_big = pods.pod("reject-share", pods.container("main", 50, 330))  # 320 blocks per GPU
    greedy = pods.container("main")
    greedy["resources"]["requests"]["cpu"] = greedy["resources"]["limits"]["cpu"] = "1000"
    cpu_only = pods.pod("reject-by-filters", greedy)
    return {p["metadata"]["name"]: p for p in (wrong_type, too_big, cpu_only)}


@dataclasses.dataclass
class Churn:
    """What three minutes showed: status writes per running pod, attempts per rejected pod,
    the backoff's allowance for the time measured, and each running pod's status in bytes."""

    writes: dict[str, int]
    fields: set[str]
    tried: dict[str, int]
    bound: int
    sizes: dict[str, int]


def _start_running(api: Rest) -> list[str]:
    """A 4-GPU pod (a whole node) and SHARES 10-core shares, Running and Ready; their names."""
    api.post(pods.PODS, pods.pod("whole-node", pods.container("main", 400)))
    pods.wait_running(api, "whole-node", timeout=120)
    names = [f"share-{i}" for i in range(SHARES)]
    for name in names:
        api.post(pods.PODS, pods.pod(name, pods.container("main", 10, 2)))
    for name in names:
        pods.wait_running(api, name, timeout=120)
    names.append("whole-node")
    wait_until(lambda: all(_ready(api, n) for n in names), 60, "pods Ready")
    return names


def measure_churn(cluster: RealCluster) -> Churn:
    """Run the pods, then create the rejected ones and watch for WINDOW_S seconds."""
    api, log = cluster.admin, cluster.procs.log("kube-scheduler")
    names = set(_start_running(api))
    time.sleep(SETTLE_S)
    listed = api.get(pods.PODS)
    running = {p["metadata"]["name"]: p for p in listed["items"] if p["metadata"]["name"] in names}
    sizes = {n: len(json.dumps(p["status"], separators=(",", ":"))) for n, p in running.items()}
    rejected = _rejected()
    before = {name: _attempts(log, name) for name in rejected}
    started = time.monotonic()
    for body in rejected.values():
        api.post(pods.PODS, body)
    version = listed["metadata"]["resourceVersion"]
    changes = watch_pods(cluster.server, cluster.pki, pods.PODS, running, version, WINDOW_S)
    elapsed = time.monotonic() - started
    tried = {name: _attempts(log, name) - before[name] for name in rejected}
    churn = Churn(dict(changes.status), changes.fields, tried, backoff_attempts(elapsed), sizes)
    print(
        f"\nstatus bytes: share {sizes['share-0']}, 4-GPU {sizes['whole-node']}; "
        f"status writes {churn.writes} ({sorted(churn.fields)}), other writes "
        f"{dict(changes.other)}; "
        f"attempts in {elapsed:.0f}s {tried} (backoff allows {churn.bound})"
    )
    return churn


@pytest.mark.realk8s
def test_running_pods_cause_no_writes_and_rejections_follow_backoff(
    operator_nodes: RealCluster,
) -> None:
    churn = measure_churn(operator_nodes)
    assert sum(churn.writes.values()) == 0, f"statuses written: {churn.writes} {churn.fields}"
    for name in ("reject-gpu-type", "reject-share"):
        tried = churn.tried[name]
        assert 1 <= tried <= churn.bound, f"{name}: {tried} attempts, backoff allows {churn.bound}"
    assert max(churn.sizes.values()) <= 4096, churn.sizes
