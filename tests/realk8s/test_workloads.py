"""Share pods and a TFJob gang through the real scheduler, API server and kubelets: each container
gets exactly the GPU share its signed assignment names, as the kubelet passed it to the runtime."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.grants import given, granted, inspect_json
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Obj, Rest
from vgpu.api.assignment import ADMITTED

pytestmark = pytest.mark.realk8s


@pytest.fixture
def api(real_cluster: RealCluster) -> Iterator[Rest]:
    pods.delete_all(real_cluster.admin)
    yield real_cluster.admin
    pods.delete_all(real_cluster.admin)


def _admitted(api: Rest, name: str) -> bool:
    return ADMITTED in pods.get(api, name)["metadata"].get("annotations", {})


def test_share_pods_get_exactly_their_grant(real_cluster: RealCluster, api: Rest) -> None:
    asks = {"share-30": (30, 16), "share-50": (50, 32), "share-70": (70, 8)}
    for name, (cores, memory) in asks.items():
        api.post(pods.PODS, pods.pod(name, pods.container("main", cores, memory)))
    for name, (cores, memory) in asks.items():
        bound = pods.wait_running(api, name)
        want = granted(bound)["main"]
        assert want["VGPU_CORES"] == str(cores)
        assert want["VGPU_MEMORY_LIMIT_MIB"] == str(memory * 256)
        assert given(real_cluster, name, "main") == want
        wait_until(
            functools.partial(_admitted, api, name),
            30,
            f"{name} marked admitted by the node agent",
        )


def test_inspect_agrees_with_the_assignments(real_cluster: RealCluster, api: Rest) -> None:
    api.post(pods.PODS, pods.pod("seen-40", pods.container("main", 40, 4)))
    bound = pods.wait_running(api, "seen-40")
    want = granted(bound)["main"]
    # Devices of the pods deleted just before stay with the kubelet until the agent's release
    # sync makes it free them (about a second); the report rightly shows them as "(kubelet)"
    # holders until then (docs/handshake.md), so wait for them to go.
    report = wait_until(
        lambda: (r := inspect_json(real_cluster))["totals"]["coresUsed"] == 40 and r,
        30,
        "the report to show only seen-40's cores (the kubelet freed the deleted pods' devices)",
    )
    holders = [
        (gpu["uuid"], holder)
        for node in report["nodes"]
        for gpu in node["gpus"]
        for holder in gpu["holders"]
    ]
    mine = [(uuid, h) for uuid, h in holders if h["pod"].endswith("seen-40")]
    assert [uuid for uuid, _ in mine] == [want["GPUS"]]
    assert mine[0][1]["cores"] == 40 and mine[0][1]["memoryMiB"] == 4 * 256
    assert report["totals"]["coresUsed"] == 40


def gang(name: str, workers: int, ps: bool = True) -> list[Obj]:
    size = workers + (1 if ps else 0)
    labels = {pods.GROUP_NAME: name, pods.GROUP_MIN: str(size)}
    members = [
        pods.pod(f"{name}-worker-{i}", pods.container("tf", 100), labels=labels)
        for i in range(workers)
    ]
    if ps:
        members.insert(0, pods.pod(f"{name}-ps-0", pods.container("tf"), labels=labels))
    return members


def test_tfjob_gang_binds_all_five_on_two_nodes(real_cluster: RealCluster, api: Rest) -> None:
    for member in gang("tfjob", 4):
        api.post(pods.PODS, member)
    names = [f"tfjob-worker-{i}" for i in range(4)]
    for name in ["tfjob-ps-0", *names]:
        pods.wait_running(api, name, timeout=90)
    gpus = set()
    for name in names:
        want = granted(pods.get(api, name))["tf"]
        assert want["VGPU_CORES"] == "100"
        assert given(real_cluster, name, "tf") == want
        gpus.add(want["GPUS"])
    assert len(gpus) == 4, "each worker has a GPU of its own"


def test_gang_that_cannot_fit_binds_nothing(real_cluster: RealCluster, api: Rest) -> None:
    members = gang("toobig", 9)  # nine whole GPUs; the two nodes have eight
    for member in members:
        api.post(pods.PODS, member)
    time.sleep(20)
    bound = [
        m["metadata"]["name"] for m in members if pods.node_of(api, str(m["metadata"]["name"]))
    ]
    assert bound == []
    reasons = {e.get("reason") for e in pods.events_for(api, "toobig-worker-0")}
    messages = " ".join(e.get("message", "") for e in pods.events_for(api, "toobig-worker-0"))
    assert "FailedScheduling" in reasons, reasons
    assert "gang" in messages.lower() or "toobig" in messages, messages


def test_init_container_and_app_container_get_their_grants(
    real_cluster: RealCluster, api: Rest
) -> None:
    """The kubelet allocates for the init container first and lets the app container reuse its
    devices (devicemanager's per-pod reuse pool); each gets what its assignment names."""
    prep = pods.container("prep", 30, 8)
    prep["env"] = [{"name": "FAKE_CRI_EXIT_CODE", "value": "0"}]  # the init container completes
    api.post(pods.PODS, pods.pod("with-init", pods.container("main", 30, 8), init=[prep]))
    bound = pods.wait_running(api, "with-init", timeout=90)
    want = granted(bound)
    assert set(want) == {"prep", "main"}, want
    assert given(real_cluster, "with-init", "prep") == want["prep"]
    assert given(real_cluster, "with-init", "main") == want["main"]


def test_an_init_container_stays_admitted_after_it_ran(
    real_cluster: RealCluster, api: Rest
) -> None:
    """The kubelet's pod-resources List never reports a regular init container, so
    its admission aged out 30 s after it ran and the extender counted it pending for the pod's
    life. It stays in `vgpu.io/admitted` past the agent's grace period and next reconciliation
    (30 s each: observed for 75 s; a persistence, not an event, so it is watched over time)."""
    from vgpu.api.admitted import read_admitted

    prep = pods.container("prep", 30, 8)
    prep["env"] = [{"name": "FAKE_CRI_EXIT_CODE", "value": "0"}]  # the init container completes
    api.post(pods.PODS, pods.pod("init-stays", pods.container("main", 30, 8), init=[prep]))
    pods.wait_running(api, "init-stays", timeout=90)

    def names() -> frozenset[str]:
        value = pods.get(api, "init-stays")["metadata"].get("annotations", {}).get(ADMITTED)
        return read_admitted(value).names

    wait_until(lambda: names() == {"main", "prep"}, 60, "both containers admitted")
    end = time.monotonic() + 75
    while time.monotonic() < end:
        assert names() == {"main", "prep"}, names()
        time.sleep(1)
