"""The DRA driver's memory limits on the real kubelet and scheduler: the driver publishes
`memoryBackend: driver`, and when the kubelet prepares a claim it sets the driver's limit of the
pod the scheduler reserved the claim for on that pod's cgroup; a preparation that cannot set it
fails, the kubelet reports that on the pod, and its retry succeeds once the cgroup is there. A
second pod of an already prepared claim gets no prepare call; its limit follows its cgroup.

The driver runs over the stand-in NVML and a fake cgroup tree (`tests.realk8s.standin_limits`);
the cluster is `tests/realk8s/test_dra.py`'s (its `dra` fixture, a cluster of its own here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.processes import wait_until
from tests.realk8s.standin_limits import LimitedGpus
from tests.realk8s.test_dra import (
    CLAIMS,
    SLICE,
    DraNode,
    allocation,
    apply,
    chart_objects,
    claim,
    claim_pod,
    dra,
    release,
    uuid_of,
)

pytestmark = pytest.mark.realk8s
__all__ = ["dra"]  # the fixture, used by name
GIB = 1 << 30


@pytest.fixture(scope="module")
def limited(dra: DraNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LimitedGpus]:
    """The DRA node's driver with the driver's memory limits on (and the RBAC the chart gives
    it then); the tier's driver after."""
    gpus = LimitedGpus.make(
        tmp_path_factory.mktemp("dra-limits"), "node-d", "A100-SXM4-80GB", 80 * GIB
    )
    for obj in chart_objects("dra.driverMemoryLimits.mode=on", show=("rbac/dra-driver",)):
        apply(dra.cluster.admin, obj)
    dra.stop_driver()
    # its periodic pass waits 10 minutes: a joining pod's limit must come from the claim watch
    flags = (*gpus.flags, "--resync-s=600")
    dra.start_driver(*flags, gpus=str(gpus.inventory), env=gpus.env())
    try:
        yield gpus
    finally:
        dra.stop_driver()
        dra.start_driver()
        gpus.standin.close()


def _backends(dra: DraNode) -> set[str]:
    devices = dra.cluster.admin.get(SLICE)["spec"]["devices"]
    return {d["attributes"].get("memoryBackend", {}).get("string", "") for d in devices}


def _prepare_failure(dra: DraNode, pod: str) -> str:
    """The kubelet's event saying the pod's claims could not be prepared, or ""."""
    for event in pods.events_for(dra.cluster.admin, pod):
        if event.get("reason") == "FailedPrepareDynamicResources":
            return str(event.get("message", ""))
    return ""


def test_prepare_sets_the_reserved_pods_limit_and_a_failure_is_reported_and_retried(
    dra: DraNode, limited: LimitedGpus
) -> None:
    api = dra.cluster.admin
    wait_until(lambda: _backends(dra) == {"driver"}, 30, "the slice to say memoryBackend driver")
    api.post(CLAIMS, claim("limited", cores="30", memory="8Gi"))
    uid = api.post(pods.PODS, claim_pod("limited", "limited"))["metadata"]["uid"]
    try:
        failure = wait_until(lambda: _prepare_failure(dra, "limited"), 90, "the prepare refused")
        assert "no pod of the claim (limited) has a cgroup under" in failure, failure
        cgroup = limited.pod_cgroup(uid)  # the kubelet retries at its next sync of the pod
        pods.wait_running(api, "limited", timeout=90)
        (result,) = allocation(api, "limited")
        assert limited.hard_limit(cgroup, uuid_of(api, result["device"])) == 8 * GIB
    finally:
        release(api, "limited", "limited")


def _limit_or_zero(limited: LimitedGpus, cgroup: Path, uuid: str) -> int:
    return limited.hard_limit(cgroup, uuid) if (cgroup / "dmem.max").exists() else 0


def test_a_pod_joining_a_prepared_shared_claim_is_limited_when_its_cgroup_appears(
    dra: DraNode, limited: LimitedGpus
) -> None:
    """The real scheduler reserves the shared claim for the second pod and the real kubelet
    starts it without preparing the claim again; the driver's claim watch sets its limit as
    soon as its cgroup is there, long before the periodic pass (10 minutes here)."""
    api = dra.cluster.admin
    wait_until(lambda: _backends(dra) == {"driver"}, 30, "the slice to say memoryBackend driver")
    api.post(CLAIMS, claim("shared", cores="30", memory="8Gi"))
    first = api.post(pods.PODS, claim_pod("first", "shared"))["metadata"]["uid"]
    second = ""
    try:
        wait_until(lambda: _prepare_failure(dra, "first"), 90, "the first prepare refused")
        limited.pod_cgroup(first)
        pods.wait_running(api, "first", timeout=90)
        second = api.post(pods.PODS, claim_pod("second", "shared"))["metadata"]["uid"]
        pods.wait_running(api, "second", timeout=90)  # no prepare call: the claim is prepared
        assert not _prepare_failure(dra, "second")
        uuid = uuid_of(api, allocation(api, "shared")[0]["device"])
        cgroup = limited.pod_cgroup(second)  # as the kubelet's EnsureExists would
        wait_until(
            lambda: _limit_or_zero(limited, cgroup, uuid) == 8 * GIB, 5, "the joining pod's limit"
        )
    finally:
        release(api, "second")
        release(api, "first", "shared")
