"""Gangs of claim pods (DRA) through the extender: kube-scheduler's DRA allocator chooses the
nodes, the extender's bind gate keeps the gang all or nothing (`vgpu.extender.gangs.claims`).

The wire plays kube-scheduler: it sends filter with the nodes its DRA filter passed and calls
bind after PreBind has allocated the member's claims on the chosen node."""

from __future__ import annotations

import itertools
import threading
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import Harness, harness, kube_client, kube_server
from vgpu.core.ids import PodKey
from vgpu.core.model import Phase
from vgpu.daemons.extender.daemon import ExtenderDaemon

__all__ = ["harness", "kube_client", "kube_server"]

DRA_NODES = ["dra-1", "dra-2"]


def claim_member(name: str, gang: str, size: int, *, cores: int = 0) -> dict[str, Any]:
    pod = make_pod(
        name,
        cores=cores,
        annotations={"vgpu.io/gang-name": gang, "vgpu.io/gang-size": str(size)},
    )
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pod


def start(harness: Harness, gang: str, size: int, **kw: float) -> tuple[ExtenderDaemon, Wire]:
    harness.put(make_node("plugin-1", gpus=2))  # a device-plugin node the extender would pick
    for name in DRA_NODES:
        harness.put(make_node(name, inventory=False))
    for i in range(size):
        harness.put(claim_member(f"{gang}-{i}", gang, size))
    daemon = harness.start(**kw)  # type: ignore[arg-type]
    return daemon, harness.wire(daemon)


def phases(daemon: ExtenderDaemon) -> dict[str, tuple[str, Phase]]:
    with daemon.cache.atomic():
        return {
            h.assignment.pod.split("/")[1]: (h.assignment.node, h.phase)
            for h in daemon.cache.ledger.holdings()
        }


def bound(harness: Harness, pods: list[str]) -> list[str]:
    return [p for p in pods if harness.pod(p)["spec"].get("nodeName")]


def test_filter_passes_the_nodes_the_dra_filter_passed(harness: Harness) -> None:
    daemon, wire = start(harness, "g", 2)
    out = wire.filter(harness.pod("g-0"), DRA_NODES)
    assert out["NodeNames"] == DRA_NODES  # never narrowed to a node of the extender's choosing
    assert phases(daemon) == {}  # nothing planned: the allocator chooses


def test_members_bind_only_once_all_reached_bind(harness: Harness) -> None:
    daemon, wire = start(harness, "g", 2, bind_wait=0.2)
    assert "waiting until 2 members" in wire.bind(harness.pod("g-0"), "dra-2")
    assert phases(daemon) == {"g-0": ("dra-2", Phase.RESERVED)} and bound(harness, ["g-0"]) == []
    # Its retry is sent back to the node where its claims are allocated.
    assert wire.filter(harness.pod("g-0"), DRA_NODES)["NodeNames"] == ["dra-2"]
    harness.daemons[0].extender.config = _with_wait(daemon, 5.0)
    results: list[str] = []
    waiter = threading.Thread(
        target=lambda: results.append(harness.wire(daemon).bind(harness.pod("g-0"), "dra-2"))
    )
    waiter.start()
    assert wire.filter(harness.pod("g-1"), DRA_NODES)["NodeNames"] == DRA_NODES
    assert wire.bind(harness.pod("g-1"), "dra-1") == ""
    waiter.join()
    assert results == [""]
    assert {p: harness.pod(p)["spec"]["nodeName"] for p in ("g-0", "g-1")} == {
        "g-0": "dra-2",
        "g-1": "dra-1",
    }


def test_a_gang_that_never_completes_binds_no_member_and_says_why(harness: Harness) -> None:
    daemon, wire = start(harness, "g", 3, gang_timeout=60, bind_wait=0.05)
    for pod, node in (("g-0", "dra-1"), ("g-1", "dra-2")):
        assert "waiting until 3 members" in wire.bind(harness.pod(pod), node)
    # g-2 never reaches the extender: kube-scheduler's DRA filter found no devices for it.
    harness.clock.advance(61)
    daemon.extender.sweep()
    assert phases(daemon) == {} and bound(harness, ["g-0", "g-1", "g-2"]) == []
    events = daemon.cache.gangs.take_events()
    assert sorted(e.pod for e in events) == ["default/g-0", "default/g-1", "default/g-2"]
    (message,) = {e.message for e in events}
    assert {e.reason for e in events} == {"VgpuGangIncomplete"}
    assert "only 2 member(s)" in message and "default/g-2 did not" in message


def test_a_gang_mixing_claims_and_vgpu_limits_is_refused_with_the_reason(
    harness: Harness,
) -> None:
    daemon, wire = start(harness, "g", 2)
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}
    harness.put(make_pod("g-1", cores=50, annotations=gang))  # vgpu.io limits, no claims
    harness.seen(daemon, lambda: daemon.cache.pods[PodKey("default/g-1")].request.wants_gpu)
    for pod in ("g-0", "g-1"):
        out = wire.filter(harness.pod(pod), ["plugin-1", *DRA_NODES])
        assert out["NodeNames"] == []
        assert "mixes members with ResourceClaims" in next(iter(out["FailedNodes"].values()))
    assert "mixes members" in wire.bind(harness.pod("g-0"), "dra-1")
    assert phases(daemon) == {}


_examples = itertools.count()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(size=st.integers(1, 4), arrive=st.lists(st.integers(0, 3), max_size=8))
def test_no_member_is_bound_unless_every_member_reached_bind(
    kube_server: Any, size: int, arrive: list[int]
) -> None:
    """Whatever members reach bind, in whatever order and on whichever node: members are
    bound only once all `size` have arrived, and then all of them are."""
    h, gang = Harness(kube_server), f"p{next(_examples)}"
    try:
        daemon, wire = start(h, gang, size, bind_wait=0.01)
        pods = [f"{gang}-{i}" for i in range(size)]
        arrived: set[str] = set()
        for i in arrive:
            pod = pods[i % size]
            arrived.add(pod)
            wire.bind(h.pod(pod), DRA_NODES[i % 2])
        for pod in sorted(arrived):  # kube-scheduler retries the waiting binds
            wire.bind(h.pod(pod), phases(daemon)[pod][0])
        assert bound(h, pods) == (pods if len(arrived) == size else [])
    finally:
        h.close()


def _with_wait(daemon: ExtenderDaemon, seconds: float) -> Any:
    from dataclasses import replace

    return replace(daemon.extender.config, bind_wait=seconds)
