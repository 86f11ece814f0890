"""The chart's queue admission, evaluated: its CEL runs here (cel-python) as the API
server runs it. The MutatingAdmissionPolicy's match conditions gate only vGPU pods naming a
queue, never pods Kueue manages; the ValidatingAdmissionPolicy lets only the extender remove the
gate or move a held pod to another queue. The ConfigMap the chart renders is what the extender's
reader accepts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.test_chart import _helm_or_skip, find, render
from vgpu.api.queues import UNLIMITED, read_config
from vgpu.core.queues import QueueSpec

celpy = pytest.importorskip("celpy")
from celpy import celtypes  # noqa: E402

Obj = dict[str, Any]
EXTENDER = "system:serviceaccount:gpu:vgpu-extender"
ENV = celpy.Environment()


@pytest.fixture(scope="module")
def objs() -> list[Obj]:
    _helm_or_skip()
    return render(
        kube_version="v1.37.2",
        queues__enabled="true",
        **{
            "queues__list[0]__name": "a",
            "queues__list[1]__name": "b",
            "queues__list[1]__weight": "3",
            "queues__list[1]__reclaim": "true",
            "queues__list[1]__cap__cores": "400",
        },
    )


def _run(expression: str, activation: dict[str, Any]) -> Any:
    return ENV.program(ENV.compile(expression)).evaluate(activation)


def _cel(value: Any) -> Any:
    return celpy.json_to_cel(value)


def gated(objs: list[Obj], pod: Obj) -> bool:
    """Whether the mutating policy applies to `pod` on CREATE (all its match conditions)."""
    policy = find(objs, "MutatingAdmissionPolicy", "vgpu-queue-gate")["spec"]
    activation = {"object": _cel(pod), "oldObject": None}
    return all(bool(_run(c["expression"], activation)) for c in policy["matchConditions"])


def refusals(objs: list[Obj], old: Obj, new: Obj, user: str) -> list[str]:
    """The validating policy's messages for an UPDATE of `old` to `new` by `user`."""
    spec = find(objs, "ValidatingAdmissionPolicy", "vgpu-protect-queue-gate")["spec"]
    variables: dict[str, Any] = {}
    base = {
        "object": _cel(new),
        "oldObject": _cel(old),
        "request": _cel({"userInfo": {"username": user}}),
    }

    def activation() -> dict[str, Any]:
        names = {celtypes.StringType(k): v for k, v in variables.items()}
        return {**base, "variables": celtypes.MapType(names)}

    for v in spec["variables"]:
        variables[v["name"]] = _run(v["expression"], activation())
    return [
        str(_run(v["messageExpression"], activation()))
        for v in spec["validations"]
        if not _run(v["expression"], activation())
    ]


def pod(labels: Obj | None = None, cores: str | None = "30", gates: list[str] = ()) -> Obj:  # type: ignore[assignment]
    limits = {"vgpu.io/cores": cores} if cores else {"cpu": "1"}
    spec: Obj = {"containers": [{"name": "m", "image": "x", "resources": {"limits": limits}}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"metadata": {"name": "p", "namespace": "ns", "labels": labels or {}}, "spec": spec}


def test_only_vgpu_pods_naming_a_queue_are_gated_and_never_kueues(objs: list[Obj]) -> None:
    assert gated(objs, pod({"vgpu.io/queue": "a"}))
    assert gated(objs, pod({"vgpu.io/queue": "a"}, gates=["other.example/gate"]))
    assert not gated(objs, pod())  # no label: as without queues
    assert not gated(objs, pod({"vgpu.io/queue": ""}))
    assert not gated(objs, pod({"vgpu.io/queue": "a"}, cores=None))  # no vGPU asked
    assert not gated(objs, pod({"vgpu.io/queue": "a", "kueue.x-k8s.io/queue-name": "q"}))
    assert not gated(objs, pod({"vgpu.io/queue": "a"}, gates=["kueue.x-k8s.io/admission"]))


def test_the_mutation_adds_the_gate_beside_others(objs: list[Obj]) -> None:
    policy = find(objs, "MutatingAdmissionPolicy", "vgpu-queue-gate")
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    (mutation,) = policy["spec"]["mutations"]
    assert mutation["patchType"] == "ApplyConfiguration"  # merges the list-map keyed by name
    assert 'schedulingGates{name: "vgpu.io/queue"}' in mutation["applyConfiguration"]["expression"]
    binding = find(objs, "MutatingAdmissionPolicyBinding", "vgpu-queue-gate")
    assert binding["spec"]["policyName"] == "vgpu-queue-gate"


def test_only_the_extender_may_remove_the_gate(objs: list[Obj]) -> None:
    held = pod({"vgpu.io/queue": "a"}, gates=["vgpu.io/queue", "x.example/g"])
    freed = pod({"vgpu.io/queue": "a"}, gates=["x.example/g"])
    assert refusals(objs, held, freed, EXTENDER) == []
    (message,) = refusals(objs, held, freed, "alice")
    assert message.startswith("only the vgpu extender may remove the scheduling gate")
    assert "alice" in message
    assert refusals(objs, held, held, "alice") == []  # other edits of a held pod pass
    assert refusals(objs, freed, pod({"vgpu.io/queue": "a"}), "alice") == []  # others' gates


def test_a_held_pod_cannot_change_queue_but_a_released_one_is_left_alone(objs: list[Obj]) -> None:
    held = pod({"vgpu.io/queue": "a"}, gates=["vgpu.io/queue"])
    moved = pod({"vgpu.io/queue": "b"}, gates=["vgpu.io/queue"])
    (message,) = refusals(objs, held, moved, "alice")
    assert "cannot change" in message
    assert refusals(objs, pod({"vgpu.io/queue": "a"}), pod({"vgpu.io/queue": "b"}), "alice") == []


def test_the_rendered_configmap_is_what_the_extender_reads(objs: list[Obj]) -> None:
    config = read_config(find(objs, "ConfigMap", "vgpu-queues")["data"]["queues.json"])
    assert config.queues == (
        QueueSpec("a", 1),
        QueueSpec("b", 3, (400, UNLIMITED), reclaim=True),
    )
    extender = find(objs, "Deployment", "vgpu-extender")
    args = extender["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--queues-config=gpu/vgpu-queues" in args


def test_queues_are_off_by_default() -> None:
    _helm_or_skip()
    objs = render(kube_version="v1.37.2")
    assert not [o for o in objs if "queue" in o["metadata"]["name"]]
