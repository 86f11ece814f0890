"""A value no reader survives, against a running extender and the fake API server: one node's
or one pod's unreadable annotation is refused for itself alone; binding goes on everywhere else,
a new leadership term resyncs past it, and a bound pod is never forgotten."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import pytest

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.extender.test_leader import _lease
from tests.waiting import wait_until
from vgpu.api.admitted import ADMITTED
from vgpu.core.ids import PodKey
from vgpu.daemons.extender.daemon import ExtenderDaemon
from vgpu.extender.cache.cluster import ClusterCache

Obj = dict[str, Any]

HUGE = "9" * 4301
"""A JSON integer past Python's int-digits limit: `json.loads` raises a bare `ValueError`."""
DEEP = "[" * 100_000
"""Nesting past the recursion limit: `json.loads` raises `RecursionError`."""
INVENTORY = "vgpu.io/gpu-inventory"


def _poisoned(name: str, value: str, *, healthy: bool = True) -> dict[str, object]:
    node = make_node(name, gpus=1)
    text = node["metadata"]["annotations"][INVENTORY]
    if not healthy:
        text = text.replace('"healthy":true', '"healthy":false')
    node["metadata"]["annotations"][INVENTORY] = text.replace('"index":0', f'"index":{value}')
    return node


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", [HUGE, DEEP])
def test_an_unreadable_inventory_in_the_watch_makes_its_node_unschedulable_with_a_reason(
    harness: Harness, value: str
) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_node("n2", gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    # The GPU is marked unhealthy in the same write: it must not stay in use.
    harness.put(_poisoned("n1", value, healthy=False))
    wait_until(lambda: "n1" in daemon.cache.problems)
    reply = wire.filter(harness.shown(make_pod("p", cores=100)), ["n1", "n2"])
    assert reply["NodeNames"] == ["n2"]
    failed = {**(reply.get("FailedNodes") or {}), **(reply.get("FailedAndUnresolvableNodes") or {})}
    assert "gpu-inventory" in failed["n1"]
    assert "n1" not in daemon.cache.node_states or not daemon.cache.node_states["n1"].free_cores


@pytest.mark.timeout(30)
def test_a_new_leadership_term_resyncs_past_an_unreadable_inventory(harness: Harness) -> None:
    harness.put(_poisoned("n-bad", HUGE))
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=50))
    daemon = harness.start(leader=_lease("a"), wait=False)
    assert daemon.wait_ready(5), daemon.why_not_ready()
    wire = harness.wire(daemon)
    assert wire.raw("GET", "/readyz")[0] == 200
    assert wire.bind(harness.pod("p"), "n1") == ""


@pytest.mark.timeout(30)
def test_a_resync_skips_an_object_it_cannot_apply_and_keeps_the_rest(harness: Harness) -> None:
    daemon = harness.start()
    odd_node = {"metadata": "not an object"}
    odd_pod = {"metadata": {"name": "odd", "namespace": ["x"]}, "spec": 7}
    daemon.cache.replace_all([odd_node, make_node("n1", gpus=1)], [odd_pod, make_pod("p")])
    assert "n1" in daemon.cache.node_states
    assert PodKey("default/p") in daemon.cache.pods


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", [HUGE, f"[{HUGE}]", DEEP[:20_000], "x" * 100_000])
def test_an_unreadable_admitted_annotation_keeps_the_pod_counted(
    harness: Harness, value: str
) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("held", cores=100))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert wire.bind(harness.pod("held"), "n1") == ""
    wait_until(lambda: daemon.cache.node_states["n1"].free_cores == [0])
    pod = harness.pod("held")
    pod["status"]["phase"] = "Running"
    pod["metadata"]["annotations"][ADMITTED] = value  # the node agent's token may patch pods
    harness.put(pod)
    harness.put(make_pod("next", cores=100))  # seen after the patch: the watch keeps order
    wait_until(lambda: PodKey("default/next") in daemon.cache.pods)
    assert daemon.cache.node_states["n1"].free_cores == [0]
    assert PodKey("default/held") in daemon.cache.pods
    assert wire.filter(harness.pod("next"), ["n1"])["NodeNames"] == []


@pytest.mark.timeout(30)
def test_a_resync_that_fails_once_is_retried_not_abandoned(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=50))
    real, calls = ClusterCache.replace_all, []

    def flaky(cache: ClusterCache, nodes: Iterable[Obj], pods: Iterable[Obj]) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug half-way through a rebuild")
        real(cache, nodes, pods)

    monkeypatch.setattr(ClusterCache, "replace_all", flaky)
    leader = harness.start(leader=_lease("a"), wait=False)
    assert leader.wait_ready(10), leader.why_not_ready()
    assert len(calls) == 2
    assert harness.wire(leader).bind(harness.pod("p"), "n1") == ""


@pytest.mark.timeout(30)
def test_readyz_turns_red_when_a_watch_loop_has_ended(harness: Harness) -> None:
    daemon = harness.start()
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    daemon.liveness.register("pods", ended, float("inf"))  # as if the pod watch had died
    status, body = harness.wire(daemon).raw("GET", "/readyz")
    assert status == 503
    assert b"pods loop has ended" in body


def _unreadable(daemon: ExtenderDaemon, kind: str) -> float | None:
    return daemon.metrics.registry.get_sample_value(
        "vgpu_extender_unreadable_objects", {"kind": kind}
    )


@pytest.mark.timeout(30)
def test_unreadable_inventories_and_admitted_values_are_counted_by_kind_until_repaired(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_node("n2", gpus=1))
    harness.put(make_node("plain", inventory=False))  # no inventory: not unreadable
    harness.put(make_pod("held", cores=100))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert wire.bind(harness.pod("held"), "n1") == ""
    assert (_unreadable(daemon, "node"), _unreadable(daemon, "pod")) == (0, 0)
    harness.put(_poisoned("n2", HUGE))
    pod = harness.pod("held")
    pod["metadata"]["annotations"][ADMITTED] = DEEP[:20_000]
    harness.put(pod)
    wait_until(lambda: (_unreadable(daemon, "node"), _unreadable(daemon, "pod")) == (1, 1))
    harness.put(make_node("n2", gpus=1))
    pod = harness.pod("held")
    pod["metadata"]["annotations"][ADMITTED] = '["main"]'
    harness.put(pod)
    wait_until(lambda: (_unreadable(daemon, "node"), _unreadable(daemon, "pod")) == (0, 0))
