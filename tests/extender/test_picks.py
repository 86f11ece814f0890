"""A filter that leaves one node holds the pod's place there until its bind (a pick).

kube-scheduler binds asynchronously and filters the next pod at once
(pkg/scheduler/schedule_one.go), so the next filter usually arrives before this pod's bind.
With `--filter-best 1` that filter would otherwise send the next pod to the same place, and
its bind would be refused. Over real HTTP against the fake API server.
"""

from __future__ import annotations

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until
from vgpu.core.ids import PodKey
from vgpu.core.model import Phase
from vgpu.daemons.extender.daemon import ExtenderDaemon

NODES = ["n1", "n2", "n3"]


def _watched(harness: Harness, daemon: ExtenderDaemon, *pods: tuple[str, int]) -> None:
    for name, cores in pods:
        harness.put(make_pod(name, cores=cores))
    wait_until(lambda: all(daemon.cache.pod(PodKey(f"default/{n}")) for n, _ in pods))


def _start(harness: Harness, gpus: int = 1) -> ExtenderDaemon:
    for name in NODES:
        harness.put(make_node(name, gpus=gpus))
    return harness.start()


def test_the_next_pods_filter_sees_the_place_this_pod_was_left(harness: Harness) -> None:
    daemon = _start(harness)
    wire = harness.wire(daemon)
    _watched(harness, daemon, ("a", 100), ("b", 100))
    (first,) = wire.filter(harness.pod("a"), NODES)["NodeNames"]
    (second,) = wire.filter(harness.pod("b"), NODES)["NodeNames"]  # before a's bind
    assert second != first  # a whole GPU each, one GPU per node
    held = daemon.cache.holding(PodKey("default/a"))
    assert held is not None and held.phase is Phase.ASSUMED
    assert wire.bind(harness.pod("a"), first) == ""
    assert wire.bind(harness.pod("b"), second) == ""
    bound = daemon.cache.holding(PodKey("default/a"))
    assert bound is not None and bound.assignment == held.assignment  # the pick was bound


def test_a_pick_is_chosen_anew_at_the_next_filter_and_expires(harness: Harness) -> None:
    daemon = _start(harness)
    wire = harness.wire(daemon)
    _watched(harness, daemon, ("a", 100))
    key = PodKey("default/a")
    for _ in range(3):  # kube-scheduler retrying the pod: one pick at a time, never stacked
        (node,) = wire.filter(harness.pod("a"), NODES)["NodeNames"]
        assert [h.assignment.pod for h in daemon.cache.ledger.holdings()] == [key]
    harness.clock.advance(daemon.extender.config.pick_ttl - 0.1)
    daemon.extender.sweep()
    assert daemon.cache.holding(key) is not None
    harness.clock.advance(0.2)
    daemon.extender.sweep()
    assert daemon.cache.holding(key) is None  # its bind never came
    assert wire.filter(harness.pod("a"), NODES)["NodeNames"] == [node]


def test_a_request_about_a_pod_the_watch_has_not_shown_holds_nothing(harness: Harness) -> None:
    daemon = _start(harness)
    wire = harness.wire(daemon)
    forged = make_pod("forged", cores=100)
    forged["metadata"]["uid"] = "uid-forged"
    out = wire.filter(forged, NODES)
    assert "default/forged" in out["Error"] and out["NodeNames"] == []
    assert daemon.cache.ledger.holdings() == []
