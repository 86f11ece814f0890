"""A pod's vGPU asks are read one way (`vgpu.api.podasks`) by the extender, the node agent and the
report: the same containers, in the kubelet's order, with the same roles, counts and problems
(a part of the wrong shape is a problem naming it, not an exception).

Two differences were found when there were three readers: the report summed every container's
ask, where the kubelet reuses a regular init container's devices (a pod with a 30-core init
container and a 30-core app container holds 30 cores, not 60); and the extender placed a pod
whose request differs from its limit, which the node agent then refused at Allocate.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.api.podasks import pod_asks
from vgpu.api.podspec import PodSpec, pod_spec
from vgpu.core.errors import InvalidRequest
from vgpu.core.kubelet_reuse import Role, new_devices
from vgpu.core.units import validate_cores, validate_memory
from vgpu.inspect.pods import pod_facts
from vgpu.node.podspec import PodInfo, pod_info

UNIT_MIB = 256
CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"

MALFORMED = "not an object"
"""A container, its resources or its limits of the wrong shape, now and then."""

values = st.one_of(
    st.none(),
    st.integers(0, 250).map(str),
    st.integers(0, 250),
    st.sampled_from(["1e1", "2e2", "0.5", "x", "-1", "1e10000000", "", None, True]),
)


@st.composite
def resources(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for resource in (CORES, MEMORY):
        where = draw(st.sampled_from(["", "limits", "requests", "both", "differ", "null"]))
        value = draw(values)
        if where in ("limits", "both", "differ", "null"):
            out.setdefault("limits", {})[resource] = None if where == "null" else value
        if where in ("requests", "both", "null"):
            out.setdefault("requests", {})[resource] = value
        if where == "differ":
            out.setdefault("requests", {})[resource] = draw(values)
    return draw(st.sampled_from([out] * 12 + [{"limits": MALFORMED}, 5]))


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    names = iter(f"c{i}" for i in range(10))

    def container(init: bool) -> Any:
        c: dict[str, Any] = {"name": next(names), "resources": draw(resources())}
        if init and draw(st.booleans()):
            c["restartPolicy"] = "Always"
        return draw(st.sampled_from([c] * 12 + [MALFORMED]))

    spec = {
        "initContainers": [container(True) for _ in range(draw(st.integers(0, 2)))],
        "containers": [container(False) for _ in range(draw(st.integers(0, 3)))],
    }
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}


def _held(info: PodInfo) -> tuple[int, int]:
    """What the kubelet's device manager holds for the pod (its reuse model), per resource."""
    cores = sum(new_devices([(c.role, c.cores) for c in info.containers]))
    blocks = sum(new_devices([(c.role, c.memory_blocks) for c in info.containers]))
    return cores, blocks


def _extender_accepts(info: PodInfo) -> bool:
    """The extender's own unit rules (shares of one GPU or whole GPUs; memory needs cores)."""
    try:
        for c in info.containers:
            validate_cores(c.cores)
            validate_memory(c.memory_blocks * UNIT_MIB, c.cores)
    except InvalidRequest:
        return False
    return True


def _extender_view(spec: PodSpec) -> list[tuple[str, int, int, Role]]:
    return [
        (c.name, c.cores, spec.memory_blocks[c.name], spec.roles[c.name])
        for c in spec.request.containers
    ]


@settings(max_examples=300, deadline=None)
@given(pods())
def test_the_extender_the_agent_and_the_report_read_the_same_asks(pod: dict[str, Any]) -> None:
    info, facts = pod_info(pod), pod_facts(pod)
    asks = pod_asks(pod)
    agent_view = [(c.name, c.cores, c.memory_blocks, c.role) for c in info.containers]
    assert agent_view == [(c.name, c.cores, c.memory_blocks, c.role) for c in asks.containers]
    assert (facts.asks_cores, facts.asks_memory_blocks) == _held(info)
    try:
        spec = pod_spec(pod, memory_unit_mib=UNIT_MIB)
    except InvalidRequest as err:
        # Refused by the extender: for the problem the agent would refuse it with, or for a
        # unit rule of the extender's own.
        assert (info.problems and str(err) == info.problems[0]) or (
            not info.problems and not _extender_accepts(info)
        )
        return
    assert not info.problems and _extender_accepts(info)
    assert _extender_view(spec) == agent_view


def _pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec = {"containers": list(containers), "initContainers": list(init)}
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def _ctr(name: str, cores: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": {CORES: cores}}, **extra}


def test_the_report_counts_what_the_kubelet_holds_after_reusing_init_devices() -> None:
    pod = _pod(_ctr("main", "30"), init=(_ctr("setup", "30"),))
    assert pod_facts(pod).asks_cores == 30
    sidecar = _pod(_ctr("main", "30"), init=(_ctr("proxy", "20", restartPolicy="Always"),))
    assert pod_facts(sidecar).asks_cores == 50


def test_a_request_that_differs_from_its_limit_is_refused_by_the_extender_as_by_the_agent() -> None:
    pod = _pod({"name": "main", "resources": {"limits": {CORES: "30"}, "requests": {CORES: "20"}}})
    problems = pod_info(pod).problems
    assert problems and "limit" in problems[0]
    try:
        pod_spec(pod, memory_unit_mib=UNIT_MIB)
    except InvalidRequest as err:
        assert str(err) == problems[0]
    else:
        raise AssertionError("the extender placed a pod the agent refuses")


def test_equal_values_written_differently_are_one_ask() -> None:
    pod = _pod({"name": "main", "resources": {"limits": {CORES: "3e1"}, "requests": {CORES: 30}}})
    assert pod_info(pod).problems == ()
    assert pod_spec(pod, memory_unit_mib=UNIT_MIB).request.containers[0].cores == 30


def test_every_reader_names_a_pod_past_the_vgpu_container_cap() -> None:
    """The extender, the node agent and the report read the cap alike: past it, a problem."""
    from vgpu.api.podasks import MAX_VGPU_CONTAINERS

    def pod(count: int) -> dict[str, Any]:
        asking = [{"name": f"c{i}", "resources": {"limits": {CORES: "1"}}} for i in range(count)]
        plain = [{"name": "sidecar"}] * 3  # containers asking nothing do not count
        return {"metadata": {"name": "p"}, "spec": {"containers": asking + plain}}

    assert not pod_asks(pod(MAX_VGPU_CONTAINERS)).problems
    (problem,) = pod_asks(pod(MAX_VGPU_CONTAINERS + 1)).problems
    assert f"more than the {MAX_VGPU_CONTAINERS} a pod may have" in str(problem)
    assert pod_info(pod(MAX_VGPU_CONTAINERS + 1)).problems == (str(problem),)
