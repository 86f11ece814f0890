"""The chart's `vgpu-dra-claims` ValidatingAdmissionPolicy, evaluated (cel-python): a vgpu.io
request asking `cores` outside 1..100 (percent of one GPU) is refused at creation, naming the
field and the fix, whether it is an `exactly` request or one of a request's `firstAvailable`
subrequests (resource.k8s.io/v1 DeviceRequest: each subrequest has its own capacity). A
subrequest once went through: the claim was created, and the pod waited on "cannot allocate all
claims" instead of the tenant being told at `kubectl apply`.

Kubernetes' CEL quantity library is stood in for as in test_ask_policy; the `requests`
variable (optional-field syntax, which cel-python does not parse) is given as its expression
reads it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.cel import cel, celpy, refusals
from tests.deploy.test_ask_policy import FUNCTIONS, celtypes
from tests.deploy.test_chart import _helm_or_skip, find, render

Obj = dict[str, Any]


def _as_integer(q: Any) -> Any:
    """An error value for a fraction, as in Kubernetes, which `false && ...` absorbs."""
    if q.value.denominator != 1:
        return celpy.CELEvalError("asInteger: not an integer")
    return celtypes.IntType(int(q.value))


KUBE: Obj = {
    **FUNCTIONS,  # and Kubernetes' quantity library's `isInteger`, as documented
    "isInteger": lambda q: celtypes.BoolType(q.value.denominator == 1),
    "asInteger": _as_integer,
}
FIX = "for more than one GPU ask whole GPUs: no capacity requests and count N"


@pytest.fixture(scope="module")
def spec() -> Obj:
    _helm_or_skip()
    objs = render(kube_version="v1.37.2", dra__enabled="true")
    return dict(find(objs, "ValidatingAdmissionPolicy", "vgpu-dra-claims")["spec"])


def exactly(cores: str | None, cls: str = "vgpu.io", name: str = "gpu") -> Obj:
    ask: Obj = {"deviceClassName": cls}
    if cores is not None:
        ask["capacity"] = {"requests": {"cores": cores}}
    return {"name": name, "exactly": ask}


def first(*subs: tuple[str, str | None], cls: str = "vgpu.io", name: str = "gpu") -> Obj:
    out = []
    for sub, cores in subs:
        ask: Obj = {"name": sub, "deviceClassName": cls}
        if cores is not None:
            ask["capacity"] = {"requests": {"cores": cores}}
        out.append(ask)
    return {"name": name, "firstAvailable": out}


def claim(*requests: Obj, kind: str = "ResourceClaim") -> Obj:
    body: Obj = {"devices": {"requests": list(requests)}}
    return {"kind": kind, "spec": {"spec": body} if kind == "ResourceClaimTemplate" else body}


def refused(spec: Obj, obj: Obj) -> list[str]:
    body = obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
    base = {"object": cel(obj), "request": cel({"operation": "CREATE"})}
    preset = {"requests": cel(body["devices"]["requests"])}
    return refusals(spec, base, functions=KUBE, preset=preset)


@pytest.mark.parametrize("cores", ["1", "30", "100"])
def test_cores_between_1_and_100_are_admitted_in_both_shapes(spec: Obj, cores: str) -> None:
    assert refused(spec, claim(exactly(cores))) == []
    assert refused(spec, claim(first(("big", "100"), ("small", cores)))) == []


def test_asks_without_cores_and_other_classes_are_admitted(spec: Obj) -> None:
    assert refused(spec, claim(exactly(None), first(("any", None), name="other"))) == []
    assert refused(spec, claim(exactly("150", cls="gpu.nvidia.com"))) == []
    assert refused(spec, claim(first(("x", "150"), cls="gpu.nvidia.com"))) == []


def test_an_exact_request_with_too_many_cores_is_refused_naming_its_field(spec: Obj) -> None:
    (message,) = refused(spec, claim(exactly("30", name="ok"), exactly("150")))
    assert message.startswith(
        "spec.devices.requests[gpu].exactly.capacity.requests.cores: 150 is not a whole number "
        "between 1 and 100 (percent of one GPU)"
    )
    assert FIX in message


@pytest.mark.parametrize("cores", ["0", "101", "150", "1500m"])
def test_a_first_available_subrequest_with_cores_out_of_range_is_refused_naming_its_field(
    spec: Obj, cores: str
) -> None:
    (message,) = refused(spec, claim(first(("one", "50"), ("many", cores))))
    assert message.startswith(
        f"spec.devices.requests[gpu].firstAvailable[many].capacity.requests.cores: {cores} is "
        "not a whole number between 1 and 100"
    )
    assert FIX in message


def test_a_claim_templates_subrequest_is_refused_at_its_own_path(spec: Obj) -> None:
    obj = claim(first(("many", "200")), kind="ResourceClaimTemplate")
    (message,) = refused(spec, obj)
    assert message.startswith(
        "spec.spec.devices.requests[gpu].firstAvailable[many].capacity.requests.cores: 200"
    )
