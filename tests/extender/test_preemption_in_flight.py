"""A preemptor whose victims are still leaving in the watch is retried, not refused.

kube-scheduler requeues a preemptor when its victim's deletion reaches its own informer; the
extender's pod watch is a second stream and may show the victim a moment longer, terminating but
still holding its GPU. Refusing every node then is a FitError, which runs PostFilter; there
`DefaultPreemption.PodEligibleToPreemptOthers` (pkg/scheduler/framework/plugins/
defaultpreemption/default_preemption.go) looks for a lower-priority pod terminating by
preemption on the pod's nominated node in kube-scheduler's snapshot, finds none (the victim is
gone there) and evicts a second victim. The filter answers such a pod with an error instead
(retried after its backoff, no PostFilter), exactly while the watch shows what would make
kube-scheduler itself wait: a lower-priority pod on the nominated node with a deletion timestamp
and a true `DisruptionTarget` condition of reason `PreemptionByScheduler`
(`PodTerminatingByPreemption`, pkg/scheduler/framework/preemption).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until

Obj = dict[str, Any]
PREEMPTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "vgpu-scheduler: preempting to accommodate a higher priority pod",
}


def _prioritised(pod: Obj, priority: int) -> Obj:
    pod["spec"]["priority"] = priority
    return pod


def _two_full_nodes(harness: Harness) -> Wire:
    """n1 and n2, one GPU each, each taken whole by a pod of priority 10 (low1, low2)."""
    harness.put(make_node("n1", gpus=1))
    harness.put(make_node("n2", gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    for name, node in (("low1", "n1"), ("low2", "n2")):
        harness.put(_prioritised(make_pod(name, cores=100), 10))
        assert wire.bind(harness.pod(name), node) == ""
    wait_until(lambda: len(daemon.cache.ledger.holdings()) == 2)
    return wire


def _leaving(harness: Harness, name: str, conditions: list[Obj]) -> None:
    """The victim as kube-scheduler's preemption leaves it: its status condition patched, then
    deleted with a grace period (a deletion timestamp, the pod still there)."""
    pod = harness.pod(name)
    pod.setdefault("status", {})["conditions"] = conditions
    pod["metadata"]["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    pod["metadata"]["deletionGracePeriodSeconds"] = 30
    harness.shown(pod)


def _preemptor(harness: Harness, *, priority: int = 1000, nominated: str = "n1") -> Obj:
    pod = _prioritised(make_pod("high", cores=100), priority)
    if nominated:
        pod["status"]["nominatedNodeName"] = nominated
    return harness.shown(pod)


def test_a_preemptor_is_retried_while_its_victim_terminates_on_its_nominated_node(
    harness: Harness,
) -> None:
    wire = _two_full_nodes(harness)
    _leaving(harness, "low1", [PREEMPTED])
    out = wire.filter(_preemptor(harness), ["n1", "n2"])
    assert not out["NodeNames"] and not out["FailedNodes"], out
    assert "n1" in out["Error"] and "default/low1" in out["Error"], out["Error"]
    waits = harness.daemons[-1].metrics.registry.get_sample_value(
        "vgpu_extender_preemption_waits_total"
    )
    assert waits == 1


@pytest.mark.parametrize(
    ("case", "priority", "nominated", "conditions"),
    [
        ("no nomination", 1000, "", [PREEMPTED]),
        ("nominated elsewhere", 1000, "n2", [PREEMPTED]),
        ("victim not lower", 10, "n1", [PREEMPTED]),
        ("deleted by someone else", 1000, "n1", []),
        ("condition not true", 1000, "n1", [{**PREEMPTED, "status": "False"}]),
        ("another reason", 1000, "n1", [{**PREEMPTED, "reason": "DeletionByTaintManager"}]),
    ],
)
def test_other_refused_preemptors_are_refused_so_that_kube_scheduler_may_preempt(
    harness: Harness, case: str, priority: int, nominated: str, conditions: list[Obj]
) -> None:
    wire = _two_full_nodes(harness)
    _leaving(harness, "low1", conditions)
    out = wire.filter(_preemptor(harness, priority=priority, nominated=nominated), ["n1", "n2"])
    assert not out["Error"], case
    assert set(out["FailedNodes"]) == {"n1", "n2"}, case


def test_a_preemptor_that_fits_elsewhere_passes_there(harness: Harness) -> None:
    wire = _two_full_nodes(harness)
    harness.put(make_node("n3", gpus=1))
    wait_until(lambda: "n3" in harness.daemons[-1].cache.node_states)
    _leaving(harness, "low1", [PREEMPTED])
    out = wire.filter(_preemptor(harness), ["n1", "n2", "n3"])
    assert not out["Error"] and out["NodeNames"] == ["n3"], out


def test_the_victims_departure_from_the_watch_lets_the_preemptor_through(
    harness: Harness,
) -> None:
    wire = _two_full_nodes(harness)
    _leaving(harness, "low1", [PREEMPTED])
    high = _preemptor(harness)
    assert wire.filter(high, ["n1", "n2"])["Error"]
    harness.store.remove("Pod", "default", "low1")
    daemon = harness.daemons[-1]
    wait_until(lambda: len(daemon.cache.ledger.holdings()) == 1)
    out = wire.filter(harness.pod("high"), ["n1", "n2"])
    assert not out["Error"] and out["NodeNames"] == ["n1"], out
