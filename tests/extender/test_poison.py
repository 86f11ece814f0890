"""Pods and requests crafted to hurt the extender: absurd quantities, malformed objects. Each is
answered in-band or reported and skipped; the watch stays synced and the extender keeps serving."""

from __future__ import annotations

from typing import Any

import pytest

from tests.extender.builders import eventually, make_node, make_pod
from tests.extender.conftest import Harness

POISON = ("1e10000000", "1e5000", "9" * 5000, "0x10")


def _bound(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    return pod


def _malformed(name: str) -> dict[str, Any]:
    pod = make_pod(name, cores=10)
    pod["spec"]["containers"] = "not a list of containers"
    return pod


def _events(harness: Harness) -> list[dict[str, Any]]:
    return [e for e in harness.store.objects("Event") if e.get("reason") == "InvalidPod"]


@pytest.mark.timeout(30)
def test_poisoned_pods_in_the_watch_are_reported_and_skipped(harness: Harness) -> None:
    harness.put(make_node("n1", cpu="8"))
    harness.put(_bound(make_pod("huge", cpu="1e5000"), "n1"))  # present at start-up
    daemon = harness.start()
    wire = harness.wire(daemon)
    harness.put(make_pod("frozen", cpu="1e10000000"))
    harness.put(_malformed("odd"))
    harness.put(_bound(make_pod("real", cpu="2"), "n1"))
    eventually(lambda: "default/real" in daemon.cache.pods)
    assert daemon.why_not_ready() is None
    assert set(daemon.cache.invalid) == {"default/huge", "default/frozen", "default/odd"}
    assert "spec.containers[0].resources.requests.cpu" in daemon.cache.invalid["default/huge"]
    eventually(lambda: len(_events(harness)) == 3)
    names = {e["involvedObject"]["name"] for e in _events(harness)}
    assert names == {"huge", "frozen", "odd"}
    _, metrics = wire.raw("GET", "/metrics")
    assert b"vgpu_extender_invalid_pods_total 3.0" in metrics
    # The watch is still live: a deletion after the poison releases the pod's holding.
    harness.store.remove("Pod", "default", "real")
    eventually(lambda: daemon.cache.ledger.holdings() == [])
    assert wire.filter(make_pod("next", cpu="7"), ["n1"])["NodeNames"] == ["n1"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", POISON)
def test_poisoned_requests_are_answered_in_band(harness: Harness, value: str) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start()
    wire = harness.wire(daemon)
    for verb in ("filter", "prioritize"):
        pod = make_pod("bad", cores=10, cpu=value)
        status, body = wire.raw("POST", f"/scheduler/{verb}", _args(pod))
        assert status == 200, body
        if verb == "filter":
            assert b"requests.cpu" in body, body
    assert wire.raw("GET", "/healthz")[0] == 200
    assert daemon.cache.ledger.holdings() == []


@pytest.mark.timeout(30)
def test_malformed_pod_objects_in_requests_are_answered_in_band(harness: Harness) -> None:
    harness.put(make_node("n1"))
    wire = harness.wire(harness.start())
    shapes: list[dict[str, Any]] = [_malformed("a")]
    pod = make_pod("b", cores=10)
    pod["spec"]["containers"][0]["resources"] = 5
    shapes.append(pod)
    pod = make_pod("c", cores=10)
    pod["metadata"]["annotations"] = ["not", "a", "map"]
    shapes.append(pod)
    pod = make_pod("d", cores=10)
    pod["spec"]["overhead"] = {"cpu": {"nested": 1}}
    shapes.append(pod)
    for pod in shapes:
        out = wire.filter(pod, ["n1"])
        assert out["Error"], pod
        assert out["NodeNames"] is not None


def _args(pod: dict[str, Any]) -> bytes:
    import json

    return json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["n1"]}).encode()


def test_reporting_never_holds_up_the_watch_and_stays_bounded() -> None:
    import threading

    from vgpu.extender.invalid import QUEUED, InvalidPods
    from vgpu.extender.metrics import ExtenderMetrics

    release = threading.Event()
    sent: list[str] = []

    class SlowApi:
        def create_event(self, involved: Any, **kwargs: Any) -> None:
            release.wait(10)  # an API server that does not answer
            sent.append(involved["metadata"]["name"])

    metrics = ExtenderMetrics()
    report = InvalidPods(SlowApi(), metrics)
    for i in range(1000):  # returns at once although no Event gets through
        pod = {"metadata": {"name": f"p{i}", "uid": f"u{i}", "resourceVersion": "1"}}
        report(pod, "bad")
        report(pod, "bad")  # the same version: reported once
    assert b"vgpu_extender_invalid_pods_total 1000.0" in metrics.exposition()
    release.set()
    eventually(lambda: len(sent) >= QUEUED)
    report.close()
    assert len(sent) <= QUEUED + 1
