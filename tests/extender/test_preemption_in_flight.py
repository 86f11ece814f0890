"""A preemptor waiting for the kubelet to free its victim's devices is retried, not refused.

kube-scheduler requeues a preemptor when its victim's deletion reaches its informer; the node's
inventory still shows the victim's devices held by the kubelet (`kubeletStale`) for about a
second after that. Refusing every node then is a FitError, which runs PostFilter:
`DefaultPreemption.PodEligibleToPreemptOthers` (pkg/scheduler/framework/plugins/
defaultpreemption/default_preemption.go) finds no terminating victim left in kube-scheduler's
snapshot and evicts a second pod. The filter answers with an error instead (retried after its
backoff, no PostFilter) while the nominated node would fit the pod once the kubelet frees them,
and keeps doing so for a while after that error has cleared the nomination (`clearNominatedNode`
in pkg/scheduler/schedule_one.go). `vgpu.extender.preemption_wait` says why.
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


def _node(name: str, stale_cores: int = 0) -> Obj:
    """One A100 whose devices the kubelet still holds `stale_cores` of for deleted pods."""
    gpu = InventoryGpu(f"GPU-{name}-0", 0, A100, 81920, 100, True, 0, (), stale_cores, 0)
    node = make_node(name)
    inventory = encode_inventory(NodeGpuInventory(256, (gpu,)))
    node["metadata"]["annotations"]["vgpu.io/gpu-inventory"] = inventory
    return node


def _stale(harness: Harness, name: str, cores: int) -> None:
    harness.put(_node(name, cores))
    daemon = harness.daemons[-1]
    wait_until(lambda: daemon.cache.node_states[NodeName(name)].gpus[0].stale_cores == cores)


def _cluster(harness: Harness, stale_cores: int = 100) -> Wire:
    """n1: the victim gone, its whole GPU still held by the kubelet (`stale_cores`); n2: its
    GPU taken whole by a running pod."""
    harness.put(_node("n1", stale_cores))
    harness.put(_node("n2"))
    daemon = harness.start()
    wire = harness.wire(daemon)
    harness.put(make_pod("low2", cores=100))
    assert wire.bind(harness.pod("low2"), "n2") == ""
    wait_until(lambda: len(daemon.cache.ledger.holdings()) == 1)
    return wire


def _preemptor(harness: Harness, nominated: str = "n1", cores: int = 100) -> Obj:
    pod = make_pod("high", cores=cores)
    if nominated:
        pod["status"]["nominatedNodeName"] = nominated
    return harness.shown(pod)


def _waits(harness: Harness) -> float | None:
    registry = harness.daemons[-1].metrics.registry
    return registry.get_sample_value("vgpu_extender_preemption_waits_total")


def test_a_preemptor_waits_while_the_kubelet_frees_its_victims_devices(harness: Harness) -> None:
    wire = _cluster(harness)
    out = wire.filter(_preemptor(harness), ["n1", "n2"])
    assert not out["NodeNames"] and not out["FailedNodes"], out
    assert "node n1" in out["Error"] and "kubelet" in out["Error"], out["Error"]
    assert _waits(harness) == 1
    # kube-scheduler cleared the nomination with that error: its retry still waits
    out = wire.filter(_preemptor(harness, nominated=""), ["n1", "n2"])
    assert "node n1" in out["Error"], out
    _stale(harness, "n1", 0)  # the kubelet freed them
    out = wire.filter(harness.pod("high"), ["n1", "n2"])
    assert not out["Error"] and out["NodeNames"] == ["n1"], out


def test_a_wait_ends_after_its_time_and_the_pod_is_refused_as_any_other(
    harness: Harness,
) -> None:
    wire = _cluster(harness)
    assert wire.filter(_preemptor(harness), ["n1", "n2"])["Error"]
    harness.clock.advance(WAIT_S)
    out = wire.filter(_preemptor(harness, nominated=""), ["n1", "n2"])
    assert not out["Error"] and set(out["FailedNodes"]) == {"n1", "n2"}, out


@pytest.mark.parametrize(
    ("case", "nominated", "held", "names"),
    [
        ("never nominated", "", 0, ["n1", "n2"]),
        ("nominated where the kubelet holds nothing", "n2", 0, ["n1", "n2"]),
        ("nominated node not asked about", "n1", 0, ["n2"]),
        ("the held devices would not make room", "n1", 60, ["n1", "n2"]),
    ],
)
def test_other_refused_pods_are_refused_so_that_kube_scheduler_may_preempt(
    harness: Harness, case: str, nominated: str, held: int, names: list[str]
) -> None:
    wire = _cluster(harness, stale_cores=0)
    if held:  # a pod holds `held` of n1's GPU, the kubelet the rest
        harness.put(make_pod("mid", cores=held))
        assert wire.bind(harness.pod("mid"), "n1") == "", case
    _stale(harness, "n1", 100 - held)
    out = wire.filter(_preemptor(harness, nominated), names)
    assert not out["Error"], case
    assert set(out["FailedNodes"]) == set(names), case
    assert not _waits(harness), case


def test_a_preemptor_that_fits_elsewhere_passes_there(harness: Harness) -> None:
    wire = _cluster(harness)
    harness.put(_node("n3"))
    wait_until(lambda: "n3" in harness.daemons[-1].cache.node_states)
    out = wire.filter(_preemptor(harness), ["n1", "n2", "n3"])
    assert not out["Error"] and out["NodeNames"] == ["n3"], out
