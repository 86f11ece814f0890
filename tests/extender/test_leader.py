"""HA: one leader binds after resyncing for its term; followers are not ready."""

from __future__ import annotations

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until
from vgpu.adapters.leader import LeaderConfig


def _lease(identity: str) -> LeaderConfig:
    return LeaderConfig(
        "kube-system",
        "vgpu-extender",
        identity,
        lease_duration=1.0,
        renew_deadline=0.6,
        retry_period=0.1,
    )


def test_only_the_leader_is_ready_and_binds_then_a_follower_takes_over(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("p", cores=50))
    harness.put(make_pod("q", cores=50))
    a = harness.start(leader=_lease("a"), wait=False)
    assert a.wait_ready(5)
    b = harness.start(leader=_lease("b"), wait=False)
    wait_until(lambda: b.why_not_ready() == "vgpu extender: this replica is not the leader")
    wa, wb = harness.wire(a), harness.wire(b)
    assert wb.raw("GET", "/readyz")[0] == 503 and wa.raw("GET", "/readyz")[0] == 200
    assert wb.filter(harness.pod("p"), ["n1"])["NodeNames"] == ["n1"]  # warm cache answers
    assert "not the leader" in wb.bind(harness.pod("p"), "n1")
    assert wa.bind(harness.pod("p"), "n1") == ""
    a.stop()  # steps down; b leads, resyncs, then counts p's share
    assert b.wait_ready(5)
    assert b.cache.node_states["n1"].free_cores == [50]
    assert wb.bind(harness.pod("q"), "n1") == ""
    assert harness.pod("q")["spec"]["nodeName"] == "n1"


def _gauge(text: str, name: str) -> float:
    (line,) = [x for x in text.splitlines() if x.startswith(name + " ")]
    return float(line.split()[1])


def test_leadership_gauges_follow_the_lease(harness: Harness) -> None:
    """vgpu_extender_leader / _binding_ready feed the stale-leader alerts of the Helm chart."""
    harness.put(make_node("n1", gpus=1))
    a = harness.start(leader=_lease("a"), wait=False)
    assert a.wait_ready(5)
    b = harness.start(leader=_lease("b"), wait=False)
    wait_until(lambda: b.why_not_ready() == "vgpu extender: this replica is not the leader")
    ma = harness.wire(a).raw("GET", "/metrics")[1].decode()
    mb = harness.wire(b).raw("GET", "/metrics")[1].decode()
    assert (_gauge(ma, "vgpu_extender_leader"), _gauge(ma, "vgpu_extender_binding_ready")) == (1, 1)
    assert (_gauge(mb, "vgpu_extender_leader"), _gauge(mb, "vgpu_extender_binding_ready")) == (0, 0)
