"""The preempt verb and the empty victim lists Kubernetes 1.38 sends (kubernetes/kubernetes#135486).

Since 1.38, kube-scheduler's dry run keeps a node whose in-tree filters pass with nothing evicted
as a candidate with an empty victim list, so a preempt-capable extender can judge it
(pkg/scheduler/framework/preemption/preemption.go, `DryRunPreemption` and `callExtenders`). The
bodies below are built as v1.38.0-beta.0 builds them: `HTTPExtender.ProcessPreemption` in
pkg/scheduler/extender.go sends `ExtenderPreemptionArgs` (k8s.io/kube-scheduler/extender/v1,
types.go: fields `Pod`, `NodeNameToVictims`, `NodeNameToMetaVictims`, no JSON tags, so Go's field
names, and the unset map encoded as null). With nodeCacheCapable, `convertToMetaVictims` starts
each list from `[]*MetaPod{}`: an empty list is `[]`. Without it the dry run's victims are
`SelectVictimsOnNode`'s `var victimPods []*v1.Pod`, nil when nothing is evicted: `null`.

What an answer means to 1.38's `callExtenders`: a node sent empty and returned empty is kept for
the next extender and dropped at the end if still empty; an omitted node is rejected; a node sent
with victims and returned empty is an error ("expected at least one victim pod on node").
"""

from __future__ import annotations

import json
from itertools import chain, combinations
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.extender.builders import Wire, make_pod
from tests.extender.conftest import Harness
from tests.extender.test_preempt import preemption_cluster
from vgpu.extender.preemption import parse_preemption_args

Obj = dict[str, Any]


def _meta_body(pod: Obj, victims: dict[str, list[str]]) -> Obj:
    """nodeCacheCapable: NodeNameToVictims unset (null), each list built from `[]`."""
    nodes = {
        node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
        for node, uids in victims.items()
    }
    return {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": nodes}


def _full_body(pod: Obj, victims: dict[str, list[Obj]]) -> Obj:
    """Full pods: NodeNameToMetaVictims unset (null), no victims a nil slice (null)."""
    nodes = {node: {"Pods": pods or None, "NumPDBViolations": 0} for node, pods in victims.items()}
    return {"Pod": pod, "NodeNameToVictims": nodes, "NodeNameToMetaVictims": None}


def _answer(wire: Wire, body: Obj) -> dict[str, list[str]]:
    status, text = wire.raw("POST", "/scheduler/preempt", json.dumps(body).encode())
    assert status == 200, text
    nodes = json.loads(text)["NodeNameToMetaVictims"]
    return {node: [p["UID"] for p in v["Pods"]] for node, v in nodes.items()}


def test_a_null_victim_list_in_the_full_pod_form_is_an_empty_list(harness: Harness) -> None:
    """1.38 sends `"Pods": null` for a node that needs no eviction in the full form; it once
    got a 400, which fails the preemption of every candidate."""
    wire, _ = preemption_cluster(harness)
    pod = harness.shown(make_pod("p", cores=80))
    assert _answer(wire, _full_body(pod, {"n2": []})) == {"n2": []}  # fits as is: kept empty
    assert _answer(wire, _full_body(pod, {"n1": []})) == {}  # does not fit: rejected


def test_an_empty_list_is_kept_empty_where_the_pod_fits_and_omitted_where_not(
    harness: Harness,
) -> None:
    wire, _ = preemption_cluster(harness)
    pod = harness.shown(make_pod("p", cores=80))
    assert _answer(wire, _meta_body(pod, {"n1": [], "n2": []})) == {"n2": []}
    small = harness.shown(make_pod("s", cores=30))  # fits beside a (40 free) or b (50 free)
    assert _answer(wire, _meta_body(small, {"n1": []})) == {"n1": []}


def test_empty_lists_pass_through_for_pods_without_vgpu(harness: Harness) -> None:
    """The extender has nothing to judge: placeholders stay for the next extender."""
    wire, _ = preemption_cluster(harness)
    cpu = harness.shown(make_pod("cpu", cores=0))
    assert _answer(wire, _meta_body(cpu, {"n1": [], "n2": []})) == {"n1": [], "n2": []}
    assert _answer(wire, _full_body(cpu, {"n1": []})) == {"n1": []}


def test_every_victim_set_comes_back_whole_or_not_at_all(harness: Harness) -> None:
    """For every subset of n1's pods as victims (the empty one included) the answer is the same
    set or no entry: never fewer victims (1.38 errors on an emptied node), never an added one."""
    wire, uid = preemption_cluster(harness)
    pod = harness.shown(make_pod("p", cores=80))
    uids = list(uid.values())
    for subset in chain.from_iterable(combinations(uids, k) for k in range(len(uids) + 1)):
        sent = {"n1": list(subset), "n2": []}
        got = _answer(wire, _meta_body(pod, sent))
        assert got["n2"] == []  # n2's idle GPU fits the pod with nothing evicted
        assert got.get("n1", list(subset)) == list(subset), subset
        frees_a_gpu = uid["a"] in subset or uid["b"] in subset  # either leaves >= 80 free
        assert ("n1" in got) == frees_a_gpu, subset


POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-p"}}
NODES = st.dictionaries(
    st.text("abn-0123", min_size=1, max_size=6),
    st.lists(st.uuids().map(str), max_size=3, unique=True),
    max_size=4,
)


@given(NODES)
def test_both_forms_read_the_same_victims_empty_ones_included(nodes: dict[str, list[str]]) -> None:
    """Whichever form kube-scheduler sends, with `[]` or `null` for no victims, the verb reads
    the same UIDs per node."""
    full = {n: [{"metadata": {"name": u[:8], "uid": u}} for u in uids] for n, uids in nodes.items()}
    for body in (_meta_body(POD, nodes), _full_body(POD, full)):
        args = parse_preemption_args(json.dumps(body).encode())
        assert {n: list(v.uids) for n, v in args.candidates.items()} == nodes
