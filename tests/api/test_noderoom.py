"""`vgpu.api.noderoom` adds up a pod's requests of resources other than CPU and memory as
kube-scheduler does (k8s.io/component-helpers/resource `PodRequests`) and judges a node by its
allocatable as NodeResourcesFit does, only for resources some node lists."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vgpu.api.nodefit import admits_none, allowed_nodes, node_facts, pod_terms
from vgpu.api.noderoom import has_room, listed, node_allocatable, pod_requests
from vgpu.core.ids import NodeName

Obj = dict[str, Any]
GI = Fraction(2**30)


def _c(name: str, restart: str | None = None, **requests: str) -> Obj:
    c: Obj = {"name": name, "resources": {"requests": dict(requests)}}
    if restart:
        c["restartPolicy"] = restart
    return c


def _node(name: str, **allocatable: str) -> Obj:
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def test_app_containers_add_up_and_the_larger_of_them_and_an_init_container_counts() -> None:
    spec = {
        "initContainers": [_c("init", **{"ephemeral-storage": "30Gi"})],
        "containers": [
            _c("a", **{"ephemeral-storage": "10Gi"}),
            _c("b", **{"ephemeral-storage": "10Gi", "example.com/fpga": "1"}),
        ],
    }
    assert pod_requests(spec) == (("ephemeral-storage", 30 * GI), ("example.com/fpga", Fraction(1)))


def test_a_sidecar_runs_beside_the_app_and_the_init_containers_started_after_it() -> None:
    spec = {
        "initContainers": [
            _c("side", "Always", **{"ephemeral-storage": "5Gi"}),
            _c("init", **{"ephemeral-storage": "20Gi"}),
        ],
        "containers": [_c("a", **{"ephemeral-storage": "10Gi"})],
        "overhead": {"ephemeral-storage": "1Gi"},
    }
    # max(app 10 + sidecar 5, sidecar 5 + init 20) + overhead 1
    assert pod_requests(spec) == (("ephemeral-storage", 26 * GI),)


def test_cpu_memory_pods_and_zero_requests_are_not_this_modules() -> None:
    spec = {"containers": [_c("a", cpu="2", memory="1Gi", pods="1", **{"example.com/x": "0"})]}
    assert pod_requests(spec) == ()


def test_a_node_is_judged_by_what_it_lists_and_a_resource_listed_nowhere_is_not() -> None:
    small = node_allocatable(_node("n1", cpu="8", **{"ephemeral-storage": "100Gi"}))
    assert small == (("ephemeral-storage", 100 * GI),)
    judged = listed([small])
    assert has_room((("ephemeral-storage", 100 * GI),), small, judged)
    assert not has_room((("ephemeral-storage", 101 * GI),), small, judged)
    assert has_room((("example.com/dra-backed", Fraction(1)),), small, judged)


def test_nodefit_refuses_the_nodes_too_small_and_says_when_none_is_left() -> None:
    facts = {
        "n1": node_facts(_node("n1", **{"example.com/fpga": "1"})),
        "n2": node_facts(_node("n2", **{"example.com/fpga": "4"})),
        "n3": node_facts(_node("n3")),
    }
    names = [NodeName(n) for n in facts]
    two = pod_terms({"containers": [_c("a", **{"example.com/fpga": "2"})]})
    assert allowed_nodes(two, facts, names) == ["n2"]
    assert not admits_none(two, facts)
    eight = pod_terms({"containers": [_c("a", **{"example.com/fpga": "8"})]})
    assert allowed_nodes(eight, facts, names) == []
    assert admits_none(eight, facts)


_JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(spec=st.dictionaries(st.sampled_from(["containers", "initContainers", "overhead"]), _JUNK))
def test_nothing_a_pod_spec_holds_makes_the_sums_raise(spec: Obj) -> None:
    """Whatever a spec holds, the sums are sorted, named and positive: nothing else is judged."""
    sums = pod_requests(spec)
    assert [name for name, _ in sums] == sorted({name for name, _ in sums})
    assert all(isinstance(name, str) and amount > 0 for name, amount in sums)


@given(status=_JUNK)
def test_nothing_a_node_holds_makes_its_allocatable_raise(status: object) -> None:
    """A status of another shape lists nothing; what is read is named and never CPU or memory."""
    assert node_allocatable({"status": status}) == () or isinstance(status, dict)
    amounts = node_allocatable({"status": {"allocatable": status}})
    assert all(isinstance(n, str) and n not in ("cpu", "memory", "pods") for n, _ in amounts)
    assert not isinstance(status, dict) or len(amounts) <= len(status)
