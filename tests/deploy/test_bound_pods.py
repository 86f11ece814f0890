"""What `vgpu-protect-handoff-annotations` keeps from a pod's author besides the hand-off
annotations: a vGPU pod created already bound to a node, and a cores limit changed after
creation. Its CEL evaluated as the API server runs it (cel-python)."""

from __future__ import annotations

from typing import Any

from tests.deploy.cel import cel
from tests.deploy.cel import refusals as cel_refusals
from tests.deploy.test_chart import _helm_or_skip, find, render

Obj = dict[str, Any]
POLICY = "vgpu-protect-handoff-annotations"


def refusals(
    objs: list[Obj], obj: Obj, user: str, resource: str = "pods", sub: str = ""
) -> list[str]:
    """The policy's messages for a CREATE of `obj` by `user`."""
    spec = find(objs, "ValidatingAdmissionPolicy", POLICY)["spec"]
    request: Obj = {"operation": "CREATE", "userInfo": {"username": user}}
    request["resource"] = {"resource": resource}
    if sub:  # the API server leaves an empty subresource out (no such key)
        request["subResource"] = sub
    return cel_refusals(spec, {"object": cel(obj), "oldObject": None, "request": cel(request)})


def pod(node: str = "", cores: str | None = "30") -> Obj:
    limits = {"vgpu.io/cores": cores} if cores else {"cpu": "1"}
    spec: Obj = {"containers": [{"name": "m", "image": "x", "resources": {"limits": limits}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": "p", "namespace": "t"}, "spec": spec}


def test_a_vgpu_pod_created_bound_to_a_node_is_refused() -> None:
    """Found by a tenant-side review: a vGPU pod created with spec.nodeName skipped the
    scheduler; while it waited unassigned on the node, the agent refused every Allocate of its
    asks there as ambiguous, failing other tenants' pods."""
    _helm_or_skip()
    objs = render(kube_version="v1.37.2")
    (message,) = refusals(objs, pod("n1"), "alice")
    assert "alice created one with spec.nodeName set (n1)" in message
    assert "nodeSelector on kubernetes.io/hostname" in message
    assert refusals(objs, pod(), "alice") == []  # placed by the scheduler
    assert refusals(objs, pod("n1", cores=None), "alice") == []  # no vGPU asked
    assert refusals(objs, pod("n1"), "system:node:n1") == []  # a static pod's mirror
    binding = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
    assert refusals(objs, binding, "alice", "pods", "binding") == []


def test_the_cores_limit_is_set_at_creation_and_never_changed() -> None:
    """Found by a tenant-side review: the agent reads vgpu.io/cores-limit at admission; a pod
    whose limit changed after it was placed could look interchangeable with another team's
    pod waiting beside it, whose admission the agent then refused as ambiguous."""
    _helm_or_skip()
    spec = find(render(kube_version="v1.37.2"), "ValidatingAdmissionPolicy", POLICY)["spec"]

    def update(old: Obj, new: Obj, user: str = "alice") -> list[str]:
        request = {"operation": "UPDATE", "userInfo": {"username": user}}
        request["resource"] = {"resource": "pods"}
        base = {"object": cel(new), "oldObject": cel(old), "request": cel(request)}
        # cel-python has no map != null, which the variable's guard uses: given as it reads
        preset = {"oldAnnotations": cel(old["metadata"].get("annotations", {}))}
        return cel_refusals(spec, base, preset=preset)

    limited, raised, plain = pod(), pod(), pod()
    limited["metadata"]["annotations"] = {"vgpu.io/cores-limit": "50"}
    raised["metadata"]["annotations"] = {"vgpu.io/cores-limit": "100"}
    for old, new in ((limited, raised), (limited, plain), (plain, limited)):
        (message,) = update(old, new)
        assert "alice tried to change it: create the pod again" in message
    assert update(limited, limited) == []
    create = {"operation": "CREATE", "userInfo": {"username": "alice"}}
    create["resource"] = {"resource": "pods"}
    assert (
        cel_refusals(spec, {"object": cel(limited), "oldObject": None, "request": cel(create)})
        == []
    )
