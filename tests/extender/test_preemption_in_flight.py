"""A pod that fits a node in a moment is retried, not refused, where a refusal could make
kube-scheduler preempt for it (`vgpu.extender.preemption_wait` says why).

Refusing every node is a FitError, and kube-scheduler's PostFilter then evicts lower-priority
pods wherever its own accounting finds room: for a preemptor whose victim's devices the kubelet
still holds (`kubeletStale`), a second victim; for a pod refused only until a pod of its shape is
admitted (invariant I), a victim on another node. An error sends the pod to the backoff queue
instead (no PostFilter), for at most `WAIT_S`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until
from vgpu.api.inventory import InventoryGpu, NodeGpuInventory, encode_inventory
from vgpu.core.ids import NodeName
from vgpu.extender.preemption_wait import WAIT_S

Obj = dict[str, Any]
A100 = "NVIDIA A100-SXM4-80GB"
LOW, HIGH = 10, 1000


def _node(name: str, stale_cores: int = 0, gpus: int = 1) -> Obj:
    """A100s; the kubelet still holds `stale_cores` of the first for deleted pods."""
    held = [stale_cores] + [0] * (gpus - 1)
    inventory = NodeGpuInventory(
        256,
        tuple(
            InventoryGpu(f"GPU-{name}-{i}", i, A100, 81920, 100, True, 0, (), c, 0)
            for i, c in enumerate(held)
        ),
    )
    node = make_node(name)
    node["metadata"]["annotations"]["vgpu.io/gpu-inventory"] = encode_inventory(inventory)
    return node


def _pod(name: str, priority: int, cores: int = 100, never: bool = False) -> Obj:
    pod = make_pod(name, cores=cores)
    pod["spec"]["priority"] = priority
    if never:
        pod["spec"]["preemptionPolicy"] = "Never"
    return pod


def _stale(harness: Harness, name: str, cores: int) -> None:
    harness.put(_node(name, cores))
    daemon = harness.daemons[-1]
    wait_until(lambda: daemon.cache.node_states[NodeName(name)].gpus[0].stale_cores == cores)


def _bound(harness: Harness, wire: Wire, name: str, priority: int, node: str) -> None:
    harness.put(_pod(name, priority))
    assert wire.bind(harness.pod(name), node) == ""
    daemon = harness.daemons[-1]
    wait_until(
        lambda: any(h.assignment.pod.endswith(f"/{name}") for h in daemon.cache.ledger.holdings())
    )


def _cluster(harness: Harness, stale_cores: int = 100, low_priority: int = LOW) -> Wire:
    """n1: a victim gone, its whole GPU still held by the kubelet (`stale_cores`); n2: its GPU
    taken whole by `low2`."""
    harness.put(_node("n1", stale_cores))
    harness.put(_node("n2"))
    wire = harness.wire(harness.start())
    _bound(harness, wire, "low2", low_priority, "n2")
    return wire


def _waits(harness: Harness) -> float | None:
    registry = harness.daemons[-1].metrics.registry
    return registry.get_sample_value("vgpu_extender_preemption_waits_total")


def test_a_preemptor_waits_while_the_kubelet_frees_its_victims_devices(harness: Harness) -> None:
    wire = _cluster(harness)
    high = harness.shown(_pod("high", HIGH))
    out = wire.filter(high, ["n1", "n2"])
    assert not out["NodeNames"] and not out["FailedNodes"], out
    assert "node n1 takes it once the kubelet frees" in out["Error"], out["Error"]
    assert "node n1" in wire.filter(high, ["n1", "n2"])["Error"]  # its retry, too
    assert _waits(harness) == 2
    _stale(harness, "n1", 0)  # the kubelet freed them
    out = wire.filter(high, ["n1", "n2"])
    assert not out["Error"] and out["NodeNames"] == ["n1"], out


def test_a_pod_waits_for_a_pod_of_its_shape_to_be_admitted(harness: Harness) -> None:
    harness.put(_node("n1", gpus=2))
    harness.put(_node("n2"))
    wire = harness.wire(harness.start())
    _bound(harness, wire, "low2", LOW, "n2")
    _bound(harness, wire, "first", HIGH, "n1")  # bound, not admitted: no agent here
    out = wire.filter(harness.shown(_pod("second", HIGH)), ["n1", "n2"])
    assert "node n1 takes it once default/first is admitted" in out["Error"], out


def test_a_pod_waits_for_a_pod_of_its_shape_that_only_holds_a_pick(harness: Harness) -> None:
    """The first pod's filter held its place (a pick) and its bind has not come yet: the node
    is in no list of bound pods, and the second pod must wait for it all the same."""
    harness.put(_node("n1", gpus=2))
    harness.put(_node("n2"))
    wire = harness.wire(harness.start())
    _bound(harness, wire, "low2", LOW, "n2")
    assert wire.filter(harness.shown(_pod("first", HIGH)), ["n1", "n2"])["NodeNames"] == ["n1"]
    out = wire.filter(harness.shown(_pod("second", HIGH)), ["n1", "n2"])
    assert "node n1 takes it once default/first is admitted" in out["Error"], out


def test_a_wait_ends_after_its_time_and_the_pod_is_refused_as_any_other(
    harness: Harness,
) -> None:
    wire = _cluster(harness)
    high = harness.shown(_pod("high", HIGH))
    assert wire.filter(high, ["n1", "n2"])["Error"]
    harness.clock.advance(WAIT_S)
    out = wire.filter(high, ["n1", "n2"])
    assert not out["Error"] and set(out["FailedNodes"]) == {"n1", "n2"}, out


@pytest.mark.parametrize(
    ("case", "never", "low", "held", "names"),
    [
        ("preemptionPolicy Never", True, LOW, 0, ["n1", "n2"]),
        ("no pod of lower priority", False, HIGH, 0, ["n1", "n2"]),
        ("the waiting node not asked about", False, LOW, 0, ["n2"]),
        ("the held devices would not make room", False, LOW, 60, ["n1", "n2"]),
    ],
)
def test_other_refused_pods_are_refused(
    harness: Harness, case: str, never: bool, low: int, held: int, names: list[str]
) -> None:
    wire = _cluster(harness, stale_cores=0, low_priority=low)
    if held:  # a pod holds `held` of n1's GPU, the kubelet the rest
        harness.put(_pod("mid", low, cores=held))
        assert wire.bind(harness.pod("mid"), "n1") == "", case
    _stale(harness, "n1", 100 - held)
    out = wire.filter(harness.shown(_pod("high", HIGH, never=never)), names)
    assert not out["Error"], case
    assert set(out["FailedNodes"]) == set(names), case
    assert not _waits(harness), case


def test_a_pod_that_fits_elsewhere_passes_there(harness: Harness) -> None:
    wire = _cluster(harness)
    harness.put(_node("n3"))
    wait_until(lambda: "n3" in harness.daemons[-1].cache.node_states)
    out = wire.filter(harness.shown(_pod("high", HIGH)), ["n1", "n2", "n3"])
    assert not out["Error"] and out["NodeNames"] == ["n3"], out
