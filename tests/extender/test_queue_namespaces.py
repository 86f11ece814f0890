"""Queues are the operator's, bound to namespaces: a pod counts in a queue only when
its namespace is bound to that queue, so a tenant's pods labelled into another team's queue
fill nothing of it, trigger no reclaim and no strict hold; pods of schedulers the extender does
not serve are not counted; a queue bound by label reads the namespaces' labels."""

from __future__ import annotations

from typing import Any

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import Harness
from tests.extender.test_queue_release import (
    _daemon,
    _gated,
    _held,
    _pass,
    _queues,
    _releaser,
    _running,
    _watched,
    old_and_young,
)

Obj = dict[str, Any]


def test_a_pod_labelled_into_another_namespaces_queue_fills_nothing_of_it(
    harness: Harness,
) -> None:
    """The attack: a running pod of namespace `default` (queue a) relabelled into queue b
    made b's next pod wait "at its cap"."""
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    wire = Wire(daemon.port)
    _queues(harness, {"name": "a"}, {"name": "b", "cap": {"cores": 100}})
    _running(harness, daemon, wire, "intruder", "a", 100)
    intruder = harness.pod("intruder")
    intruder["metadata"]["labels"]["vgpu.io/queue"] = "b"
    harness.put(intruder)
    _held(harness, "mine", "b", 100)
    _watched(daemon, "b/mine")
    releaser = _releaser(daemon)
    assert _pass(releaser) == ["mine"]
    assert releaser.last.standing["b"].allocated == (100, 320)  # a whole GPU: all its memory


def test_another_schedulers_pod_is_not_counted(harness: Harness) -> None:
    """Never-bound pods (`schedulerName: nobody`) held a queue's cap for good."""
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    _queues(harness, {"name": "b", "cap": {"cores": 100}})
    ghost = make_pod("ghost", cores=100, namespace="b", labels={"vgpu.io/queue": "b"})
    ghost["spec"]["schedulerName"] = "nobody"
    harness.put(ghost)
    _held(harness, "mine", "b", 100)
    _watched(daemon, "b/ghost", "b/mine")
    assert _pass(_releaser(daemon)) == ["mine"]


def test_a_pod_labelled_into_a_reclaiming_queue_evicts_nobody(harness: Harness) -> None:
    """Relabelled into a reclaiming queue, a tenant's held pods evicted the other team's."""
    daemon = old_and_young(harness)
    _held(harness, "thief", "b", 100, namespace="default")
    _watched(daemon, "thief")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 0
    assert releaser.last.waiting["default/thief"] == "namespace default is bound to queue a, not b"


def test_a_pod_naming_a_strict_queue_from_another_namespace_holds_nobody_back(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"}, {"name": "big", "strictSeconds": 600})
    _held(harness, "freeze", "big", 200, namespace="default")  # fits nowhere
    _held(harness, "work", "a", 50)
    _watched(daemon, "freeze", "work")
    releaser = _releaser(daemon)
    assert _pass(releaser) == ["work"]
    assert releaser.last.held_since == {}
    assert _gated(harness, "freeze")


def test_a_queue_bound_by_label_serves_the_namespaces_carrying_it(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    for name, labels in (("team-x", {"team": "x"}), ("other", {})):
        harness.put(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )
    daemon = _daemon(harness)
    _queues(harness, {"name": "x", "namespaceSelector": {"matchLabels": {"team": "x"}}})
    _held(harness, "in", "x", 50, namespace="team-x")
    _held(harness, "out", "x", 50, namespace="other")
    _watched(daemon, "team-x/in", "other/out")
    releaser = _releaser(daemon)
    assert _pass(releaser) == ["in"]
    assert releaser.last.waiting["other/out"] == "namespace other is bound to no queue, not x"
