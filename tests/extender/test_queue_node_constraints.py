"""The queue pass places and reclaims only where kube-scheduler would let the pod run: its
`nodeSelector`, required node affinity and tolerations against the nodes' labels, taints and
cordon (`vgpu.api.nodefit`). A held pod whose constraints rule a node out was released to a
place there it could never bind to, and reclaim evicted other teams' pods on nodes the pod could
not use: a tenant of a reclaiming queue could evict other teams' pods at will with a pod naming
a node pool that does not exist."""

from __future__ import annotations

from typing import Any

from tests.extender.builders import Wire, make_node
from tests.extender.conftest import Harness
from tests.extender.test_queue_release import (
    _daemon,
    _held,
    _pass,
    _pod,
    _queues,
    _releaser,
    _running,
    _watched,
)
from tests.waiting import wait_until
from vgpu.core.ids import PodKey

Obj = dict[str, Any]


def _node(name: str, labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    node = make_node(name, gpus=1)
    node["metadata"]["labels"] = {"kubernetes.io/hostname": name, **(labels or {})}
    node["spec"] = spec
    return node


def _constrain(harness: Harness, name: str, **spec: Any) -> None:
    pod = _pod(harness, name)
    pod["spec"].update(spec)
    harness.put(pod)


def _two_teams(harness: Harness) -> Any:
    daemon = _daemon(harness)
    _queues(
        harness, {"name": "a"}, {"name": "b", "weight": 3, "reclaim": True}, minRuntimeSeconds=0
    )
    return daemon


def test_reclaim_evicts_nobody_for_a_pod_whose_node_selector_matches_no_node(
    harness: Harness,
) -> None:
    harness.put(_node("n1", {"pool": "t4"}))
    harness.put(_node("n2", {"pool": "t4"}))
    daemon = _two_teams(harness)
    wire = Wire(daemon.port)
    _running(harness, daemon, wire, "victim1", "a", 100, on="n1")
    _running(harness, daemon, wire, "victim2", "a", 100, on="n2")
    _held(harness, "want", "b", 100)
    _constrain(harness, "want", nodeSelector={"pool": "does-not-exist"})
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 0
    assert harness.store.get("Pod", "default", "victim1") is not None
    assert harness.store.get("Pod", "default", "victim2") is not None


def test_reclaim_evicts_only_on_a_node_the_pods_affinity_allows(harness: Harness) -> None:
    """n1's victim is the cheaper one (younger: less GPU time lost, first by name too), but the
    pod's required affinity names n2 only."""
    harness.put(_node("n1"))
    harness.put(_node("n2"))
    daemon = _two_teams(harness)
    wire = Wire(daemon.port)
    _running(harness, daemon, wire, "young", "a", 100, "2033-05-18T03:00:00Z", on="n1")
    _running(harness, daemon, wire, "old", "a", 100, "2031-01-01T00:00:00Z", on="n2")
    _held(harness, "want", "b", 100)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    _constrain(harness, "want", affinity=affinity)
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 1
    wait_until(lambda: harness.store.get("Pod", "default", "old") is None)
    assert harness.store.get("Pod", "default", "young") is not None


def test_reclaim_evicts_nobody_on_a_tainted_or_cordoned_node_the_pod_cannot_use(
    harness: Harness,
) -> None:
    harness.put(_node("n1", taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]))
    harness.put(_node("n2", unschedulable=True))
    daemon = _two_teams(harness)
    wire = Wire(daemon.port)
    _running(harness, daemon, wire, "on-tainted", "a", 100, on="n1")
    _running(harness, daemon, wire, "on-cordoned", "a", 100, on="n2")
    _held(harness, "want", "b", 100)
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 0
    # tolerating n1's taint, the pod may use n1: reclaim evicts there
    _constrain(harness, "want", tolerations=[{"key": "gpu", "operator": "Exists"}])
    releaser = _releaser(daemon, wall=2_000_000_100.0)  # past the rest of a job with no victims
    wait_until(lambda: _pass(releaser) == [] and releaser.evicted_total == 1)
    wait_until(lambda: harness.store.get("Pod", "default", "on-tainted") is None)
    assert harness.store.get("Pod", "default", "on-cordoned") is not None


def test_a_held_pod_is_released_to_a_place_on_a_node_its_selector_allows(
    harness: Harness,
) -> None:
    harness.put(_node("n1", {"pool": "t4"}))
    harness.put(_node("n2", {"pool": "a100"}))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    _held(harness, "p1", "a", 100)
    _held(harness, "p2", "a", 100)
    _held(harness, "nowhere", "a", 100)
    _constrain(harness, "p1", nodeSelector={"pool": "a100"})
    _constrain(harness, "p2", nodeSelector={"pool": "a100"})
    _constrain(harness, "nowhere", nodeSelector={"pool": "h100"})
    _watched(daemon, "p1", "p2", "nowhere")
    released = _pass(_releaser(daemon))
    assert len(released) == 1 and released[0] in ("p1", "p2")  # n2 has room for one only
    holding = daemon.cache.holding(PodKey(f"default/{released[0]}"))
    assert holding is not None and holding.assignment.node == "n2"


def test_reclaim_evicts_nobody_for_a_pod_whose_affinity_kube_scheduler_cannot_parse(
    harness: Harness,
) -> None:
    """`NotIn: ["-"]` passes the API server's validation, but kube-scheduler cannot build the
    term (not a label value) and so matches it to no node: the pod never binds anywhere."""
    harness.put(_node("n1", {"pool": "t4"}))
    harness.put(_node("n2", {"pool": "t4"}))
    daemon = _two_teams(harness)
    wire = Wire(daemon.port)
    _running(harness, daemon, wire, "victim1", "a", 100, on="n1")
    _running(harness, daemon, wire, "victim2", "a", 100, on="n2")
    _held(harness, "want", "b", 100)
    term = {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["-"]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    _constrain(harness, "want", affinity=affinity)
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 0
    assert harness.store.get("Pod", "default", "victim1") is not None
    assert harness.store.get("Pod", "default", "victim2") is not None


def test_reclaim_evicts_nobody_for_a_pod_held_by_a_gate_of_its_own(harness: Harness) -> None:
    """A pod made with a scheduling gate of its own beside vgpu.io/queue: kube-scheduler sees it
    only once its author removes that gate, so reclaim evicted another team's pod for GPUs that
    then waited for the reservation's timeout, pod after pod. Once the gate is gone it asks."""
    harness.put(_node("n1"))
    harness.put(_node("n2"))
    daemon = _two_teams(harness)
    wire = Wire(daemon.port)
    _running(harness, daemon, wire, "victim1", "a", 100, on="n1")
    _running(harness, daemon, wire, "victim2", "a", 100, on="n2")
    _held(harness, "want", "b", 100)
    gates = _pod(harness, "want")["spec"]["schedulingGates"]
    _constrain(harness, "want", schedulingGates=[*gates, {"name": "example.com/mine"}])
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    assert _pass(releaser) == []
    assert releaser.evicted_total == 0
    _constrain(harness, "want", schedulingGates=gates)
    releaser = _releaser(daemon, wall=2_000_000_100.0)  # past the rest of a job with no victims
    wait_until(lambda: _pass(releaser) == [] and releaser.evicted_total == 1)
