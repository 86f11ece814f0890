"""Pods and requests crafted to hurt the extender: absurd quantities, malformed objects. Each is
answered in-band or reported and skipped; the watch stays synced and the extender keeps serving."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until
from vgpu.core.errors import InvalidRequest
from vgpu.core.ids import PodKey
from vgpu.core.model import Phase

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
    wait_until(lambda: "default/real" in daemon.cache.pods)
    assert daemon.why_not_ready() is None
    assert set(daemon.cache.invalid) == {"default/huge", "default/frozen", "default/odd"}
    assert (
        "spec.containers[0].resources.requests.cpu" in daemon.cache.invalid[PodKey("default/huge")]
    )
    wait_until(lambda: len(_events(harness)) == 3)
    names = {e["involvedObject"]["name"] for e in _events(harness)}
    assert names == {"huge", "frozen", "odd"}
    _, metrics = wire.raw("GET", "/metrics")
    assert b"vgpu_extender_invalid_pods_total 3.0" in metrics
    # The watch is still live: a deletion after the poison releases the pod's holding.
    harness.store.remove("Pod", "default", "real")
    wait_until(lambda: daemon.cache.ledger.holdings() == [])
    assert wire.filter(harness.shown(make_pod("next", cpu="7")), ["n1"])["NodeNames"] == ["n1"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", POISON)
def test_poisoned_requests_are_answered_in_band(harness: Harness, value: str) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start()
    wire = harness.wire(daemon)
    pod = harness.shown(make_pod("bad", cores=10, cpu=value))  # its watched version is unreadable
    for verb in ("filter", "prioritize"):
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
    wait_until(lambda: len(sent) >= QUEUED)
    report.close()
    assert len(sent) <= QUEUED + 1


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_PATHS = [
    ("metadata", "annotations"),
    ("metadata", "labels"),
    ("metadata", "name"),
    ("metadata", "uid"),
    ("spec", "containers"),
    ("spec", "initContainers"),
    ("spec", "overhead"),
    ("spec", "nodeName"),
    ("status",),
    ("spec", "containers", 0, "resources"),
    ("spec", "containers", 0, "resources", "limits"),
    ("spec", "containers", 0, "resources", "requests", "cpu"),
    ("spec", "containers", 0, "resources", "limits", "vgpu.io/cores"),
    ("spec", "containers", 0, "name"),
]


def _mutated(changes: list[tuple[tuple[Any, ...], Any]], bound: bool) -> dict[str, Any]:
    """A pod with JSON values of any shape written at the given fields."""
    pod = make_pod("p", cores=10)
    pod["metadata"].update(uid="u", resourceVersion="1")
    if bound:
        pod["spec"]["nodeName"] = "n1"
    for path, value in changes:
        target: Any = pod
        for step in path[:-1]:
            if isinstance(target, dict):
                target = target.get(step)
            elif isinstance(target, list) and isinstance(step, int) and step < len(target):
                target = target[step]
            else:
                break
        else:
            if isinstance(target, dict):
                target[path[-1]] = value
    return pod


_CHANGES = st.lists(st.tuples(st.sampled_from(_PATHS), _JSON), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(_CHANGES, st.booleans())
def test_no_pod_content_makes_the_watch_handler_raise(
    changes: list[tuple[tuple[Any, ...], Any]], bound: bool
) -> None:
    from vgpu.api.podspec import key_of
    from vgpu.extender.cache.cluster import ClusterCache

    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    cache.apply_node("ADDED", make_node("n1"))
    told: list[str] = []
    cache.subscribe(invalid=lambda pod, problem: told.append(problem))
    pod = _mutated(changes, bound)
    key = key_of(pod)
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        cache.apply_pod(kind, pod)  # never raises
        assert (key in cache.pods) + (key in cache.invalid) <= 1
    assert cache.ledger.holdings() == [] and not cache.pods and not cache.invalid
    assert all("Pod" in t or "spec" in t or "metadata" in t for t in told), told


@settings(max_examples=200, deadline=None)
@given(_CHANGES, st.booleans())
def test_no_pod_content_in_a_request_raises_out_of_a_verb(
    changes: list[tuple[tuple[Any, ...], Any]], bound: bool
) -> None:
    from vgpu.api.podspec import key_of
    from vgpu.extender.cache.cluster import ClusterCache
    from vgpu.extender.config import ExtenderConfig
    from vgpu.extender.preemption import PreemptionArgs, Preemptor, Victims
    from vgpu.extender.service import Extender
    from vgpu.extender.wire import ExtenderArgs

    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    cache.apply_node("ADDED", make_node("n1"))
    ext = Extender(cache, config=ExtenderConfig(watch_wait=0))  # no wait: shown or not
    pod = _mutated(changes, bound)
    cache.apply_pod("ADDED", pod)  # a request names its pod: the watch has shown it
    held = cache.ledger.holdings()
    args = ExtenderArgs(pod, ["n1"])
    result = ext.filter(args)
    assert result.error or result.passed or result.failed or result.unresolvable
    ext.prioritize(args)
    with contextlib.suppress(InvalidRequest):  # answered 400 by the HTTP layer
        Preemptor(ext).preempt(PreemptionArgs(pod, {"n1": Victims((), 0)}))
    new = [h for h in cache.ledger.holdings() if h not in held]
    assert [(h.assignment.pod, h.phase) for h in new] in ([], [(key_of(pod), Phase.ASSUMED)])
