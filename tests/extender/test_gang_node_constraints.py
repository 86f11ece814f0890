"""A gang's members are planned, and their places reserved, only on nodes each member's own
`nodeSelector`, required node affinity and tolerations allow (`vgpu.api.nodefit`), as
kube-scheduler's filters would. The coordinator plans every member when the first one reaches
filter (or the queue pass releases the gang), and kube-scheduler then asks about each member only
the nodes its filters passed: a member reserved on a node it cannot run on was never offered
there, and the gang held its GPUs until the gang timeout, over and over."""

from __future__ import annotations

from typing import Any

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import Harness
from tests.extender.test_queue_release import GATE, _daemon, _pass, _queues, _releaser, _watched
from vgpu.api.nodefit import node_facts, pod_terms
from vgpu.core.ids import PodKey
from vgpu.daemons.extender.daemon import ExtenderDaemon

Obj = dict[str, Any]


def _node(name: str, gpus: int, labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    node = make_node(name, gpus=gpus)
    node["metadata"]["labels"] = {"kubernetes.io/hostname": name, **(labels or {})}
    node["spec"] = spec
    return node


def _member(name: str, gang: str, size: int, **spec: Any) -> Obj:
    annotations = {"vgpu.io/gang-name": gang, "vgpu.io/gang-size": str(size)}
    pod = make_pod(name, cores=100, annotations=annotations)
    pod["spec"].update(spec)
    return pod


def _nodes_held(daemon: ExtenderDaemon, *names: str) -> dict[str, str | None]:
    with daemon.cache.atomic():
        held = {n: daemon.cache.ledger.holding(PodKey(f"default/{n}")) for n in names}
    return {n: (h.assignment.node if h is not None else None) for n, h in held.items()}


def _admitted(nodes: list[Obj], pod: Obj) -> list[str]:
    """The nodes kube-scheduler's own filters pass `pod` on (what it asks the extender about)."""
    terms = pod_terms(pod["spec"])
    return [n["metadata"]["name"] for n in nodes if terms.admits(node_facts(n))]


def test_a_gang_is_reserved_only_on_nodes_its_members_node_selector_allows(
    harness: Harness,
) -> None:
    nodes = [_node("n1", 2, {"pool": "t4"}), _node("n2", 2, {"pool": "a100"})]
    for node in nodes:
        harness.put(node)
    daemon = harness.start()
    wire = Wire(daemon.port)
    pods = [_member(f"job-{i}", "job", 2, nodeSelector={"pool": "a100"}) for i in range(2)]
    for pod in pods:
        harness.shown(pod, daemon)
    for pod in pods:
        asked = _admitted(nodes, pod)
        assert asked == ["n2"]
        out = wire.filter(harness.pod(pod["metadata"]["name"]), asked)
        assert out["NodeNames"] == ["n2"], out
    assert _nodes_held(daemon, "job-0", "job-1") == {"job-0": "n2", "job-1": "n2"}


def test_each_member_is_planned_on_the_nodes_its_own_constraints_allow(harness: Harness) -> None:
    """One member selects the a100 pool, the other tolerates the t4 node's taint and needs it
    (required affinity by name); a third node is cordoned."""
    taint = {"key": "gpu", "value": "t4", "effect": "NoSchedule"}
    nodes = [
        _node("n1", 1, {"pool": "t4"}, taints=[taint]),
        _node("n2", 1, {"pool": "a100"}),
        _node("n3", 4, {"pool": "a100"}, unschedulable=True),
    ]
    for node in nodes:
        harness.put(node)
    daemon = harness.start()
    wire = Wire(daemon.port)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    pods = [
        _member("job-0", "job", 2, nodeSelector={"pool": "a100"}),
        _member(
            "job-1",
            "job",
            2,
            affinity=affinity,
            tolerations=[{"key": "gpu", "operator": "Equal", "value": "t4"}],
        ),
    ]
    for pod in pods:
        harness.shown(pod, daemon)
    expected = {"job-0": "n2", "job-1": "n1"}
    for pod in pods:
        name = pod["metadata"]["name"]
        asked = _admitted(nodes, pod)
        assert asked == [expected[name]]
        out = wire.filter(harness.pod(name), asked)
        assert out["NodeNames"] == [expected[name]], out
    assert _nodes_held(daemon, "job-0", "job-1") == expected


def test_a_gang_with_a_member_no_node_admits_reserves_nothing_and_says_why(
    harness: Harness,
) -> None:
    nodes = [_node("n1", 2, {"pool": "t4"}), _node("n2", 2, {"pool": "a100"})]
    for node in nodes:
        harness.put(node)
    daemon = harness.start()
    wire = Wire(daemon.port)
    pods = [
        _member("job-0", "job", 2),
        _member("job-1", "job", 2, nodeSelector={"pool": "h100"}),
    ]
    for pod in pods:
        harness.shown(pod, daemon)
    out = wire.filter(harness.pod("job-0"), ["n1", "n2"])
    assert out["NodeNames"] == [], out
    reasons = set(out["FailedNodes"].values())
    assert reasons and all("default/job-1" in r and "no node admits it" in r for r in reasons)
    assert _nodes_held(daemon, "job-0", "job-1") == {"job-0": None, "job-1": None}


def test_the_queue_pass_releases_a_gang_to_places_its_members_node_selector_allows(
    harness: Harness,
) -> None:
    harness.put(_node("n1", 2, {"pool": "t4"}))
    harness.put(_node("n2", 2, {"pool": "a100"}))
    daemon = _daemon(harness)
    _queues(harness, {"name": "a"})
    for i in range(2):
        pod = _member(f"g{i}", "g", 2, nodeSelector={"pool": "a100"})
        pod["metadata"]["labels"]["vgpu.io/queue"] = "a"
        pod["spec"]["schedulingGates"] = list(GATE)
        harness.put(pod)
    _watched(daemon, "g0", "g1")
    assert sorted(_pass(_releaser(daemon))) == ["g0", "g1"]
    assert _nodes_held(daemon, "g0", "g1") == {"g0": "n2", "g1": "n2"}
