"""The pod page's "where it could go now" offers a pod only the nodes its nodeSelector, required
node affinity and tolerations allow (`vgpu.api.nodefit`), as the extender's gang planner and
queue pass place it (kube-scheduler never offers it another node); a pod that no node admits is
told so plainly instead of being shown on a node it can never run on."""

from __future__ import annotations

from typing import Any

from tests.inspect.builders import node, pod
from tests.web.test_where import A100, gang_pod
from vgpu.api.nodefit import NO_NODE_ADMITS
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.web.where import where_now

Obj = dict[str, Any]
RULED_OUT = NO_NODE_ADMITS


def pool(name: str, label: str, **spec: Any) -> Obj:
    obj = node(name, [A100])
    obj["metadata"]["labels"]["pool"] = label
    if spec:
        obj["spec"] = spec
    return obj


def waiting(key: str, cores: int = 50, **spec: Any) -> Obj:
    obj = pod(key, asks={"main": (cores, 0)}, phase="Pending")
    obj["spec"].update(spec)
    return obj


def nodes_of(snapshot: Snapshot, key: str) -> set[str]:
    ready = [n["metadata"]["name"] for n in snapshot.nodes]
    where = where_now(snapshot, DEFAULT_NAMES, key, ready)
    assert where is not None and not where.reason, where
    return {str(a.node) for a in where.assignments}


NODES = (pool("n1", "t4"), pool("n2", "a100"))
"""Without constraints the default policy puts the pod on n1 (checked below)."""


def test_without_constraints_the_pod_goes_to_n1() -> None:
    assert nodes_of(Snapshot(NODES, (waiting("b/w"),)), "b/w") == {"n1"}


def test_a_pod_is_shown_only_on_a_node_its_node_selector_allows() -> None:
    snapshot = Snapshot(NODES, (waiting("b/w", nodeSelector={"pool": "a100"}),))
    assert nodes_of(snapshot, "b/w") == {"n2"}


def test_a_pod_is_shown_only_on_a_node_its_required_affinity_allows() -> None:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    assert nodes_of(Snapshot(NODES, (waiting("b/w", affinity=affinity),)), "b/w") == {"n2"}


def test_a_tainted_or_cordoned_node_is_shown_only_to_a_pod_that_tolerates_it() -> None:
    taint = {"key": "gpu", "value": "t4", "effect": "NoSchedule"}
    nodes = (pool("n1", "t4", taints=[taint]), pool("n2", "a100"))
    assert nodes_of(Snapshot(nodes, (waiting("b/w"),)), "b/w") == {"n2"}
    tolerates = waiting("b/t", tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert nodes_of(Snapshot(nodes, (tolerates,)), "b/t") == {"n1"}
    cordoned = (pool("n1", "t4", unschedulable=True), pool("n2", "a100"))
    assert nodes_of(Snapshot(cordoned, (waiting("b/w"),)), "b/w") == {"n2"}


def test_a_pod_no_node_admits_is_told_so_plainly() -> None:
    snapshot = Snapshot(NODES, (waiting("b/w", nodeSelector={"pool": "h100"}),))
    where = where_now(snapshot, DEFAULT_NAMES, "b/w", ["n1", "n2"])
    assert where is not None and not where.assignments
    assert where.reason == RULED_OUT


def test_each_gang_member_is_shown_only_on_a_node_it_may_use() -> None:
    members = [gang_pod(f"ml/w{i}", 100, 2) for i in range(2)]
    _spec(members[0])["nodeSelector"] = {"pool": "a100"}
    _spec(members[1])["nodeSelector"] = {"pool": "t4"}
    where = where_now(Snapshot(NODES, tuple(members)), DEFAULT_NAMES, "ml/w0", ["n1", "n2"])
    assert where is not None and not where.reason
    assert {str(a.pod): str(a.node) for a in where.assignments} == {"ml/w0": "n2", "ml/w1": "n1"}


def test_a_gang_with_a_member_no_node_admits_names_that_member() -> None:
    members = [gang_pod(f"ml/w{i}", 50, 2) for i in range(2)]
    _spec(members[1])["nodeSelector"] = {"pool": "h100"}
    where = where_now(Snapshot(NODES, tuple(members)), DEFAULT_NAMES, "ml/w0", ["n1", "n2"])
    assert where is not None and not where.assignments
    assert where.reason == f"gang ml/train: member ml/w1: {RULED_OUT}"


def _spec(pod: dict[str, object]) -> dict[str, object]:
    spec = pod["spec"]
    assert isinstance(spec, dict)
    return spec
