"""A request only names its pod: filter, prioritize and preempt for pods the watch has not shown
are refused and leave the ledger as it was; bind acts only on pods the API server confirms."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.extender.test_request_state import learned
from tests.waiting import wait_until
from vgpu.core.ids import PodKey
from vgpu.daemons.extender.daemon import ExtenderDaemon


def _ghost(name: str, *, node: str = "", cpu: str = "32", cores: int = 0) -> dict[str, Any]:
    pod = make_pod(name, cpu=cpu, cores=cores)
    pod["metadata"]["uid"] = f"uid-{name}"
    pod["metadata"]["resourceVersion"] = "7"
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = "Running"
    return pod


def _ledger(daemon: ExtenderDaemon) -> Any:
    cache = daemon.cache
    with cache.atomic():
        return (
            sorted(((h.assignment, h.phase) for h in cache.ledger.holdings()), key=repr),
            sorted(cache.pods),
            {k: sorted(v) for k, v in cache.members.items() if v},
            {k: dict(v) for k, v in cache.pending.items()},
        )


def test_a_ghost_pod_in_a_filter_request_leaves_the_ledger_unchanged(harness: Harness) -> None:
    harness.put(make_node("n1", cpu="32"))
    daemon = harness.start(watch_wait=0.2)
    wire = harness.wire(daemon)
    before = _ledger(daemon)
    out = wire.filter(_ghost("ghost", node="n1"), ["n1"])
    assert "default/ghost" in out["Error"] and out["NodeNames"] == []
    wire.prioritize(_ghost("ghost", node="n1"), ["n1"])
    assert _ledger(daemon) == before
    real = make_pod("real", cpu="1")
    harness.put(real)
    assert wire.filter(harness.pod("real"), ["n1"])["NodeNames"] == ["n1"]
    assert wire.bind(harness.pod("real"), "n1") == ""


def test_a_stale_version_of_a_watched_pod_is_not_written_either(harness: Harness) -> None:
    harness.put(make_node("n1", cpu="32"))
    daemon = harness.start()
    wire = harness.wire(daemon)
    harness.put(make_pod("p", cpu="1"))
    wait_until(lambda: "default/p" in daemon.cache.pods)
    before = _ledger(daemon)
    stale = harness.pod("p")
    stale["metadata"]["uid"] = "someone-else"
    stale["spec"]["nodeName"] = "n1"
    wire.filter(stale, ["n1"])
    assert _ledger(daemon) == before


def test_bind_acts_only_on_pods_the_api_server_confirms(harness: Harness) -> None:
    harness.put(make_node("n1", cpu="32"))
    daemon = harness.start()
    wire = harness.wire(daemon)
    ghost = _ghost("ghost", cpu="1", cores=10)
    wire.filter(ghost, ["n1"])
    assert "not found" in wire.bind(ghost, "n1")
    assert _ledger(daemon)[0] == []
    gets = [r for r in harness.server.requests if r.method == "GET" and "/pods/ghost" in r.path]
    assert gets, "bind asked the API server about the pod"


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["filter", "prioritize", "preempt"]),
            st.sampled_from(["", "n1", "n2"]),
            st.integers(0, 100),
            st.sampled_from(["1", "64", "1e3"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_no_sequence_of_requests_for_unwatched_pods_changes_the_ledger_or_teaches_the_policy(
    harness: Harness, requests: list[tuple[str, str, int, str, bool]]
) -> None:
    if not harness.daemons:
        harness.put(make_node("n1", cpu="32"))
        harness.put(make_node("n2", cpu="32"))
        harness.put(make_pod("real", cpu="1", cores=30))
        daemon = harness.start(watch_wait=0.05)
        assert harness.wire(daemon).bind(harness.pod("real"), "n1") == ""
        wait_until(lambda: daemon.cache.pods[PodKey("default/real")].node == "n1")
    daemon = harness.daemons[0]
    wire = harness.wire(daemon)
    before = _ledger(daemon), learned(daemon)
    for i, (verb, node, cores, cpu, gang) in enumerate(requests):
        pod = _ghost(f"g{i}", node=node, cpu=cpu, cores=cores)
        if gang:
            pod["metadata"]["annotations"] = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}
        doc: dict[str, Any] = {"Pod": pod, "NodeNames": ["n1", "n2"]}
        if verb == "preempt":
            doc = {"Pod": pod, "NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": 0}}}
        wire.raw("POST", f"/scheduler/{verb}", json.dumps(doc).encode())
    assert (_ledger(daemon), learned(daemon)) == before
