"""`vgpu.api.nodefit` applies kube-scheduler's NodeAffinity, TaintToleration and NodeUnschedulable
rules as kube-scheduler does (k8s.io/component-helpers nodeaffinity, `ToleratesTaint`)."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.api.nodefit import NO_TERMS, allowed_by_pod, allowed_nodes, node_facts, pod_terms
from vgpu.core.ids import NodeName, PodKey

Obj = dict[str, Any]


def _node(labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": "n1", "labels": labels or {}}, "spec": spec}


def _expr(key: str, op: str, *values: str) -> Obj:
    return (
        {"key": key, "operator": op, "values": list(values)}
        if values
        else {
            "key": key,
            "operator": op,
        }
    )


def _affinity(*terms: Obj) -> Obj:
    required = {"nodeSelectorTerms": list(terms)}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }


def test_a_pod_without_constraints_goes_to_any_untainted_node() -> None:
    assert NO_TERMS.admits(node_facts(_node({"a": "1"})))
    assert pod_terms({}).admits(node_facts(_node()))


def test_node_selector_needs_every_label_equal() -> None:
    terms = pod_terms({"nodeSelector": {"pool": "a100", "zone": "x"}})
    assert terms.admits(node_facts(_node({"pool": "a100", "zone": "x", "other": "y"})))
    assert not terms.admits(node_facts(_node({"pool": "a100"})))
    assert not terms.admits(node_facts(_node({"pool": "t4", "zone": "x"})))


@pytest.mark.parametrize(
    ("expr", "labels", "admitted"),
    [
        (_expr("pool", "In", "a", "b"), {"pool": "b"}, True),
        (_expr("pool", "In", "a"), {}, False),
        (_expr("pool", "NotIn", "a"), {}, True),
        (_expr("pool", "NotIn", "a"), {"pool": "a"}, False),
        (_expr("pool", "Exists"), {"pool": ""}, True),
        (_expr("pool", "DoesNotExist"), {"pool": ""}, False),
        (_expr("gen", "Gt", "3"), {"gen": "4"}, True),
        (_expr("gen", "Gt", "3"), {"gen": "3"}, False),
        (_expr("gen", "Lt", "3"), {"gen": "x"}, False),
        (_expr("gen", "Lt", "3"), {}, False),
    ],
)
def test_match_expressions_follow_kube_scheduler(
    expr: Obj, labels: dict[str, str], admitted: bool
) -> None:
    terms = pod_terms(_affinity({"matchExpressions": [expr]}))
    assert terms.admits(node_facts(_node(labels))) is admitted


def test_terms_are_ored_their_requirements_anded_and_an_empty_term_matches_nothing() -> None:
    node = node_facts(_node({"pool": "a", "zone": "x"}))
    by_name = {"matchFields": [_expr("metadata.name", "In", "n1")]}
    assert pod_terms(_affinity({"matchExpressions": [_expr("pool", "In", "z")]}, by_name)).admits(
        node
    )
    both = {"matchExpressions": [_expr("pool", "In", "a"), _expr("zone", "In", "y")]}
    assert not pod_terms(_affinity(both)).admits(node)
    assert not pod_terms(_affinity({})).admits(node)
    assert not pod_terms(_affinity()).admits(node)
    other = {"matchFields": [_expr("metadata.name", "NotIn", "n1")]}
    assert not pod_terms(_affinity(other)).admits(node)


def test_hard_taints_must_be_tolerated_and_a_cordon_counts_as_one() -> None:
    tainted = node_facts(
        _node(
            taints=[
                {"key": "gpu", "value": "a100", "effect": "NoSchedule"},
                {"key": "soft", "effect": "PreferNoSchedule"},
            ]
        )
    )
    assert not NO_TERMS.admits(tainted)
    for toleration in (
        {"key": "gpu", "operator": "Exists"},
        {"key": "gpu", "value": "a100"},
        {"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ):
        assert pod_terms({"tolerations": [toleration]}).admits(tainted), toleration
    for toleration in (
        {"key": "gpu", "value": "t4"},
        {"key": "gpu", "operator": "Exists", "effect": "NoExecute"},
        {"key": "other", "operator": "Exists"},
    ):
        assert not pod_terms({"tolerations": [toleration]}).admits(tainted), toleration
    cordoned = node_facts(_node(unschedulable=True))
    assert not NO_TERMS.admits(cordoned)
    unschedulable = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}
    assert pod_terms({"tolerations": [unschedulable]}).admits(cordoned)


def test_objects_of_another_shape_never_raise() -> None:
    bads: list[Any] = [None, 3, "x", [], {"nodeSelector": [1], "affinity": "x", "tolerations": {}}]
    for bad in bads:
        spec = bad if isinstance(bad, dict) else {"nodeSelector": bad, "tolerations": bad}
        assert pod_terms(spec) == NO_TERMS, bad  # nothing of another shape constrains the pod
    facts = node_facts({"metadata": [], "spec": {"taints": [None, 3, {"effect": 5}]}})
    assert (facts.name, facts.labels, facts.taints) == ("", (), ())
    terms = pod_terms(_affinity({"matchExpressions": [_expr("a", "In", "b")]}))
    assert hash(terms) == hash(pod_terms(_affinity({"matchExpressions": [_expr("a", "In", "b")]})))


def test_allowed_nodes_keeps_the_nodes_admitted_and_those_not_yet_known() -> None:
    facts = {
        "n1": node_facts({"metadata": {"name": "n1", "labels": {"pool": "a100"}}}),
        "n2": node_facts({"metadata": {"name": "n2", "labels": {"pool": "t4"}}}),
    }
    names = [NodeName("n1"), NodeName("n2"), NodeName("n3")]
    a100 = pod_terms({"nodeSelector": {"pool": "a100"}})
    assert allowed_nodes(a100, facts, names) == ["n1", "n3"]  # n3: not watched yet
    assert allowed_nodes(NO_TERMS, facts, names) is None  # every node: no restriction at all
    h100 = pod_terms({"nodeSelector": {"pool": "h100"}})
    by_pod = allowed_by_pod(
        {PodKey("ns/a"): a100, PodKey("ns/b"): NO_TERMS, PodKey("ns/c"): h100}, facts, names[:2]
    )
    assert by_pod == {"ns/a": ["n1"], "ns/c": []}  # ns/b may use every node: left out


@pytest.mark.parametrize(
    ("expr", "labels"),
    [
        (_expr("pool", "NotIn", "-"), {"pool": "a"}),
        (_expr("pool", "NotIn", "a b"), {}),
        (_expr("pool", "NotIn", "x" * 64), {}),
        (_expr("pool", "In", "a", "not a label"), {"pool": "a"}),
        (_expr("gen", "Gt", "1_0"), {"gen": "11"}),
        (_expr("gen", "Gt", " 3"), {"gen": "4"}),
        (_expr("gen", "Gt", "-1"), {"gen": "4"}),
        (_expr("gen", "Lt", "99999999999999999999"), {"gen": "4"}),
        (_expr("gen", "Gt", "3"), {"gen": "1_0"}),
    ],
)
def test_a_term_kube_scheduler_cannot_parse_matches_nothing(
    expr: Obj, labels: dict[str, str]
) -> None:
    """The API server takes any In/NotIn/Gt/Lt values, but kube-scheduler builds each term with
    `labels.NewRequirement`, which wants label values and, for Gt/Lt, a Go int64 (and compares
    node labels parsed as one): a term it cannot build matches no node. Read more leniently, a
    pod that kube-scheduler puts nowhere looked placeable, and reclaim evicted for it."""
    node = node_facts(_node(labels))
    assert not pod_terms(_affinity({"matchExpressions": [expr]})).admits(node)
    other = {"matchExpressions": [_expr("pool", "DoesNotExist")]}
    assert pod_terms(_affinity({"matchExpressions": [expr]}, other)).admits(
        node_facts(_node({k: v for k, v in labels.items() if k != "pool"}))
    )
