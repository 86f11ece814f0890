"""Bind: signed assignment annotations, idempotent retries, API failures, invariant I, restart."""

from __future__ import annotations

import json

import pytest

from tests.extender.builders import ledger_of, make_node, make_pod
from tests.extender.conftest import KEY, Harness
from tests.waiting import wait_until
from vgpu.api.assignment import ASSIGNMENT, verify
from vgpu.core.fit import Verdict
from vgpu.core.ids import NodeName, PodKey
from vgpu.core.model import Assignment, Phase


def _holding_phase(daemon: object, pod: str) -> Phase | None:
    held = daemon.cache.ledger.holding(PodKey(f"default/{pod}"))  # type: ignore[attr-defined]
    return None if held is None else held.phase


def test_bind_writes_a_signed_assignment_and_counts_it(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=2))
    harness.put(make_pod("p", cores=30, memory=8))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert wire.bind(harness.pod("p"), "n1") == ""
    pod = harness.pod("p")
    assignment = verify(pod["metadata"]["annotations"], KEY)
    assert assignment is not None and assignment.node == "n1"
    assert assignment.uid == pod["metadata"]["uid"]
    (share,) = assignment.containers[0].shares
    assert share.cores == 30 and share.memory_mmib == 8 * 256 * 1000
    wait_until(lambda: _holding_phase(daemon, "p") is Phase.BOUND)
    ns = daemon.cache.node_states["n1"]
    assert sorted(ns.free_cores) == [70, 100]


def test_bind_of_a_watched_pod_reads_nothing_back(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=30))
    daemon = harness.start()
    wait_until(lambda: PodKey("default/p") in daemon.cache.pods)
    harness.server.clear_requests()
    assert harness.wire(daemon).bind(harness.pod("p"), "n1") == ""
    calls = [(r.method, r.path) for r in harness.server.requests if "watch" not in r.query]
    assert calls == [("POST", "/api/v1/namespaces/default/pods/p/binding")]


def test_retried_bind_never_allocates_twice(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=60))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert wire.bind(harness.pod("p"), "n1") == ""
    assert wire.bind(harness.pod("p"), "n1") == ""  # kube-scheduler retried after a lost reply
    wait_until(lambda: _holding_phase(daemon, "p") is Phase.BOUND)
    assert daemon.cache.node_states["n1"].free_cores == [40]
    assert "already bound to n1" in wire.bind(harness.pod("p"), "n2")


def test_reply_lost_then_409_with_same_assignment_is_success(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=60))
    daemon = harness.start(request_timeout=0.3)
    wire = harness.wire(daemon)
    # The API server binds, but only after the client gave up: outcome unknown at first.
    harness.server.inject("POST", r"/pods/p/binding", delay=0.6)
    error = wire.bind(harness.pod("p"), "n1")
    assert "will retry" in error
    assert _holding_phase(daemon, "p") is not None  # kept: it may have been bound
    wait_until(lambda: harness.pod("p")["spec"].get("nodeName") == "n1")
    wait_until(lambda: _holding_phase(daemon, "p") is Phase.BOUND)
    assert daemon.cache.node_states["n1"].free_cores == [40]
    assert wire.bind(harness.pod("p"), "n1") == ""


def test_409_for_someone_elses_binding_releases_the_assumption(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=60))
    daemon = harness.start()
    wire = harness.wire(daemon)
    harness.server.inject("POST", r"/pods/p/binding", status=409, message="conflict")
    assert "409" in wire.bind(harness.pod("p"), "n1")
    assert _holding_phase(daemon, "p") is None
    assert daemon.cache.node_states["n1"].free_cores == [100]
    assert wire.bind(harness.pod("p"), "n1") == ""


def test_500_and_timeouts_fail_in_band_without_leaking(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=60))
    daemon = harness.start(request_timeout=0.3)
    wire = harness.wire(daemon)
    harness.server.inject("POST", r"/pods/p/binding", status=500, times=1)
    assert "500" in wire.bind(harness.pod("p"), "n1")
    assert _holding_phase(daemon, "p") is Phase.ASSUMED  # outcome unknown: kept, not doubled
    harness.server.inject("POST", r"/pods/p/binding", drop=True, times=1)
    assert wire.bind(harness.pod("p"), "n1") != ""
    assert daemon.cache.node_states["n1"].free_cores == [40]
    assert wire.bind(harness.pod("p"), "n1") == ""
    wait_until(lambda: _holding_phase(daemon, "p") is Phase.BOUND)
    assert daemon.cache.node_states["n1"].free_cores == [40]


def test_stale_assumptions_expire(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=60))
    daemon = harness.start()
    wire = harness.wire(daemon)
    harness.server.inject("POST", r"/pods/p/binding", status=503, times=1)
    assert "503" in wire.bind(harness.pod("p"), "n1")
    q = harness.shown(make_pod("q", cores=60))
    assert wire.filter(q, ["n1"])["NodeNames"] == []
    harness.clock.advance(31)
    daemon.extender.sweep()
    assert _holding_phase(daemon, "p") is None
    assert wire.filter(q, ["n1"])["NodeNames"] == ["n1"]


def test_unknown_pod_and_stale_uid(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=10))
    wire = harness.wire(harness.start())
    assert "not found" in wire.bind(make_pod("ghost"), "n1")
    stale = harness.pod("p")
    stale["metadata"]["uid"] = "old-uid"
    assert "stale" in wire.bind(stale, "n1")
    assert "does not fit" in wire.bind(harness.pod("p"), "missing-node")


def _gpu(harness: Harness, pod: str) -> str:
    text = harness.pod(pod)["metadata"]["annotations"][ASSIGNMENT]
    return str(json.loads(text)["containers"]["main"][0]["uuid"])


def test_invariant_i_equal_shares_go_to_the_pending_gpu(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=2))
    for name in ("a", "b", "c"):
        harness.put(make_pod(name, cores=40))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert wire.bind(harness.pod("a"), "n1") == ""
    wait_until(lambda: _holding_phase(daemon, "a") is Phase.BOUND)
    assert wire.bind(harness.pod("b"), "n1") == ""  # a not admitted yet: b must share its GPU

    assert _gpu(harness, "a") == _gpu(harness, "b")
    wait_until(lambda: _holding_phase(daemon, "b") is Phase.BOUND)
    out = wire.filter(harness.pod("c"), ["n1"])  # the pending GPU is full: wait, resolvably
    assert "waiting for admission" in out["FailedNodes"]["n1"]
    for name in ("a", "b"):
        pod = harness.pod(name)
        pod["metadata"]["annotations"]["vgpu.io/admitted"] = "main"
        harness.put(pod)
    wait_until(lambda: wire.filter(harness.pod("c"), ["n1"])["NodeNames"] == ["n1"])
    assert wire.bind(harness.pod("c"), "n1") == ""
    assert _gpu(harness, "c") != _gpu(harness, "a")


def test_admission_on_a_node_still_pending_refreshes_the_filter(harness: Harness) -> None:
    # The filter memoises the invariant-I answer per node; an admission changes the pending
    # containers without changing the node's capacity, and must still be seen.
    harness.put(make_node("n1", gpus=2))
    for name, cores in (("a", 40), ("b", 40), ("d", 30), ("c", 40)):
        harness.put(make_pod(name, cores=cores))
    daemon = harness.start()
    wire = harness.wire(daemon)
    for name in ("a", "b", "d"):
        assert wire.bind(harness.pod(name), "n1") == ""
        wait_until(lambda n=name: _holding_phase(daemon, n) is Phase.BOUND)  # type: ignore[misc]
    assert _gpu(harness, "a") == _gpu(harness, "b") != _gpu(harness, "d")
    out = wire.filter(harness.pod("c"), ["n1"])  # a's GPU is full, the other one confusable
    assert "waiting for admission" in out["FailedNodes"]["n1"]
    for name in ("a", "b"):
        pod = harness.pod(name)
        pod["metadata"]["annotations"]["vgpu.io/admitted"] = "main"
        harness.put(pod)
    # d is still pending (30 cores: not confusable with c), so the node is still pending
    wait_until(lambda: wire.filter(harness.pod("c"), ["n1"])["NodeNames"] == ["n1"])
    assert wire.bind(harness.pod("c"), "n1") == ""


def test_whole_gpu_pods_bind_one_after_another(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=2))
    harness.put(make_pod("a", cores=100))
    harness.put(make_pod("b", cores=100))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert wire.bind(harness.pod("a"), "n1") == ""
    wait_until(lambda: _holding_phase(daemon, "a") is Phase.BOUND)
    assert "waiting for admission" in wire.bind(harness.pod("b"), "n1")
    pod = harness.pod("a")
    pod["metadata"]["annotations"]["vgpu.io/admitted"] = '["main"]'
    harness.put(pod)
    wait_until(lambda: wire.filter(harness.pod("b"), ["n1"])["NodeNames"] == ["n1"])
    assert wire.bind(harness.pod("b"), "n1") == ""


def test_deleted_pod_frees_its_share_at_once(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=90))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert wire.bind(harness.pod("p"), "n1") == ""
    wait_until(lambda: _holding_phase(daemon, "p") is Phase.BOUND)
    q = harness.shown(make_pod("q", cores=20))
    assert wire.filter(q, ["n1"])["NodeNames"] == []
    harness.store.remove("Pod", "default", "p")
    wait_until(lambda: wire.filter(q, ["n1"])["NodeNames"] == ["n1"])


def test_restart_counts_bound_pods_from_their_assignments(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=70))
    harness.put(make_pod("forged", cores=70))
    first = harness.start()
    assert harness.wire(first).bind(harness.pod("p"), "n1") == ""
    first.stop()
    forged = harness.pod("forged")  # bound without the scheduler, copying p's annotation
    forged["spec"]["nodeName"] = "n1"
    forged["metadata"]["annotations"] = dict(harness.pod("p")["metadata"]["annotations"])
    harness.put(forged)
    second = harness.start()
    assert second.cache.node_states["n1"].free_cores == [30]
    q = harness.shown(make_pod("q", cores=40), second)
    out = harness.wire(second).filter(q, ["n1"])
    assert out["Error"] == "" and out["NodeNames"] == []


def test_a_bind_in_flight_counts_as_pending_for_invariant_i(harness: Harness) -> None:
    # kube-scheduler binds asynchronously: the next pod can be placed before the watch shows
    # the previous one bound. Its assumption must already keep equal asks off other GPUs.
    harness.put(make_node("n1", gpus=2))
    harness.put(make_pod("a", cores=30))
    daemon = harness.start()
    ext = daemon.extender
    with daemon.cache.atomic():
        spec_a, policy, _ = ext.pods.read(harness.pod("a"))
        a = ext.cache.place(spec_a, "n1", policy, ext.scheduler)
        assert isinstance(a, Assignment)
        ledger_of(daemon.cache).assume(a)  # the Binding is on its way, not yet watched
        gpu_a = a.containers[0].shares[0].uuid
        b = make_pod("b", cores=30, annotations={"vgpu.io/gpu-uuid-exclude": gpu_a})
        spec_b, _, _ = ext.pods.read(harness.put(b))
        pending = daemon.cache.pending_on(NodeName("n1"), besides=spec_b.request.key)
        assert [p.pod for p in pending] == ["default/a"]
        placed = ext.cache.place(spec_b, "n1", policy, ext.scheduler)
    assert isinstance(placed, Verdict) and "waiting for admission" in str(placed)


def test_bind_refuses_an_assignment_longer_than_the_agent_reads(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extender bound pods whose signed assignment passed the agent's bound, and
    the agent then called it forged. Both hold `MAX_ASSIGNMENT_CHARS` (here made small, so a
    pod of a realistic size reaches it): bind refuses, assumes nothing, binds nothing."""
    from tests.pods import container
    from vgpu.api import assignment as assignment_text

    monkeypatch.setattr(assignment_text, "MAX_ASSIGNMENT_CHARS", 2_000)
    harness.put(make_node("n1", gpus=4))
    pod = make_pod("p", cores=1)
    pod["spec"]["initContainers"] = [container(f"init-{k}", cores=1) for k in range(30)]
    daemon = harness.start()
    error = harness.wire(daemon).bind(harness.shown(pod), "n1")
    assert "vgpu.io/assignment: " in error and "more than the 2000 a node agent reads" in error
    assert "fewer vGPU containers" in error
    assert "nodeName" not in harness.pod("p")["spec"]
    assert daemon.cache.holding(PodKey("default/p")) is None
