"""The shipped `vgpu-scheduler-name` MutatingAdmissionPolicy, evaluated (cel-python) as the API
server runs it: a new pod asking a vGPU resource that names no scheduler (or the default one) is
given the chart's scheduler name; a pod naming another scheduler, or asking no vGPU, is left
alone. With queues on, the queue gate must still see the name it sets, whichever policy the API
server runs first."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.deploy.cel import cel, run
from tests.deploy.test_chart import _helm_or_skip, find, render
from tests.deploy.test_queue_policies import TEAM_A, gated
from tests.pods import container, pod_obj

Obj = dict[str, Any]
QUEUES = {
    "queues__enabled": "true",
    "queues__list[0]__name": "a",
    "queues__list[0]__namespaces[0]": "team-a",
}


@pytest.fixture(scope="module")
def objs() -> list[Obj]:
    _helm_or_skip()
    return render(kube_version="v1.37.2", scheduler__name="gpu-sched", **QUEUES)


def _run(expression: str, pod: Obj) -> Any:
    return run(expression, {"object": cel(pod)})


def admitted(objs: list[Obj], pod: Obj) -> Obj:
    """`pod` as the policy leaves it on CREATE: its scheduler name set when every match
    condition holds. The one mutation sets only spec.schedulerName to the value it spells."""
    policy = find(objs, "MutatingAdmissionPolicy", "vgpu-scheduler-name")["spec"]
    if not all(bool(_run(c["expression"], pod)) for c in policy["matchConditions"]):
        return pod
    (mutation,) = policy["mutations"]
    expression = mutation["applyConfiguration"]["expression"]
    prefix = "Object{spec: Object.spec{schedulerName: "
    assert expression.startswith(prefix) and expression.endswith("}}")
    name = json.loads(expression[len(prefix) : -2])
    return {**pod, "spec": {**pod["spec"], "schedulerName": name}}


def _scheduler(pod: Obj) -> str | None:
    name = pod["spec"].get("schedulerName")
    return None if name is None else str(name)


@pytest.mark.parametrize("named", [None, "", "default-scheduler"])
def test_a_vgpu_pod_naming_no_scheduler_gets_the_charts(objs: list[Obj], named: str | None) -> None:
    for asks in (container(cores=30), container(cores=30, memory=4), container(memory=4)):
        pod = pod_obj("p", [asks], scheduler=named)
        assert _scheduler(admitted(objs, pod)) == "gpu-sched"


def test_an_init_container_or_a_request_alone_counts_as_asking(objs: list[Obj]) -> None:
    init = pod_obj("p", [container()], init=[container("i", cores=100)])
    assert _scheduler(admitted(objs, init)) == "gpu-sched"
    asking = container(requests={"vgpu.io/cores": "20"})
    del asking["resources"]["limits"]
    assert _scheduler(admitted(objs, pod_obj("p", [asking]))) == "gpu-sched"


def test_pods_of_another_scheduler_or_without_vgpu_are_left_alone(objs: list[Obj]) -> None:
    assert _scheduler(admitted(objs, pod_obj("p", [container(cores=30)], scheduler="volcano"))) == (
        "volcano"
    )
    plain = pod_obj("p", [container(limits={"cpu": "1", "nvidia.com/gpu": "1"})])
    assert _scheduler(admitted(objs, plain)) is None


def test_the_queue_gate_sees_the_name_whichever_policy_runs_first(objs: list[Obj]) -> None:
    """Run first or after vgpu-scheduler-name, the gate takes a vGPU pod naming no scheduler:
    the API server picks the order, and a reinvocation alone (reinvocationPolicy IfNeeded, kept)
    left such pods ungated and outside their queue on the test cluster."""
    pod = pod_obj("p", [container(cores=30)], namespace="team-a")
    assert gated(objs, pod, TEAM_A) == "a"  # the gate first: no scheduler name yet
    assert gated(objs, admitted(objs, pod), TEAM_A) == "a"  # after the name is set
    gate = find(objs, "MutatingAdmissionPolicy", "vgpu-queue-gate")["spec"]
    assert gate["reinvocationPolicy"] == "IfNeeded"
    binding = find(objs, "MutatingAdmissionPolicyBinding", "vgpu-scheduler-name")
    assert binding["spec"]["policyName"] == "vgpu-scheduler-name"


def test_a_chart_value_turns_it_off_and_clusters_before_1_36_get_none() -> None:
    _helm_or_skip()
    names = [o["metadata"]["name"] for o in render(kube_version="v1.37.2")]
    assert "vgpu-scheduler-name" in names  # on by default
    off = render(kube_version="v1.37.2", admissionPolicy__setSchedulerName="false")
    assert "vgpu-scheduler-name" not in [o["metadata"]["name"] for o in off]
    old = render(kube_version="v1.35.3")
    assert "vgpu-scheduler-name" not in [o["metadata"]["name"] for o in old]
