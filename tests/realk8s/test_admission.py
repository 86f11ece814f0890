"""The hand-off annotations on the real API server: the shipped ValidatingAdmissionPolicy and
RBAC keep users from forging, replaying or binding with them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realk8s import manifests, pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Identity, Obj, Rest
from vgpu.api.assignment import ADMITTED, ASSIGNMENT, SIGNATURE

pytestmark = pytest.mark.realk8s

TENANT_RULES: list[Obj] = [
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["create", "get", "list", "update", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods/binding", "bindings"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update", "patch"]},
]


def _grant(admin: Rest, name: str, rules: list[Obj], ns: str = pods.NS) -> None:
    manifests.create(
        admin,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}},
    )
    manifests.create(
        admin,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": ns},
            "rules": rules,
        },
    )
    manifests.create(
        admin,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
    )


ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def _user(cluster: RealCluster, name: str, rules: list[Obj], ns: str = pods.NS) -> Rest:
    """A ServiceAccount of namespace `ns` granted `rules` there only, as a client."""
    _grant(cluster.admin, name, rules, ns)
    token = manifests.service_account_token(cluster.admin, ns, name)
    rest = Rest(cluster.server, str(cluster.pki / "ca.crt"), Identity(name, token=token))
    for rule in rules:  # the API server's RBAC cache learns of a new grant a moment later
        asked = {"namespace": ns, "verb": rule["verbs"][0], "resource": rule["resources"][0]}
        review: Obj = {"spec": {"resourceAttributes": {**asked, "group": rule["apiGroups"][0]}}}

        def allowed(review: Obj = review) -> bool:
            return bool(rest.post(ACCESS_REVIEWS, review).get("status", {}).get("allowed"))

        wait_until(allowed, 30, f"{name}'s grant to be in force")
    return rest


@pytest.fixture
def tenant(real_cluster: RealCluster) -> Iterator[Rest]:
    """A user who may do anything to pods in the namespace, including bind them."""
    pods.delete_all(real_cluster.admin)
    rest = _user(real_cluster, "tenant", TENANT_RULES)
    yield rest
    rest.close()
    pods.delete_all(real_cluster.admin)


def _binding(pod: str, node: str, annotations: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "annotations": annotations},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def unscheduled(name: str, **kwargs: object) -> dict[str, object]:
    """A pod no scheduler serves, so only the test binds it."""
    obj = pods.pod(name, pods.container("main", 10), **kwargs)  # type: ignore[arg-type]
    obj["spec"]["schedulerName"] = "nobody"
    return obj


def _refused(err: pytest.ExceptionInfo[ApiError]) -> None:
    assert err.value.status in (403, 422), err.value
    assert "vgpu" in err.value.message, err.value.message


def test_forged_assignment_on_create_is_refused(tenant: Rest) -> None:
    forged = {ASSIGNMENT: '{"v":1}', SIGNATURE: "00" * 32}
    with pytest.raises(ApiError) as err:
        tenant.post(pods.PODS, pods.pod("forged", pods.container("main", 10), annotations=forged))
    _refused(err)


def test_replayed_assignment_is_refused(real_cluster: RealCluster, tenant: Rest) -> None:
    real_cluster.admin.post(pods.PODS, pods.pod("original", pods.container("main", 20)))
    bound = pods.wait_running(real_cluster.admin, "original")
    notes = bound["metadata"]["annotations"]
    copied = {ASSIGNMENT: notes[ASSIGNMENT], SIGNATURE: notes[SIGNATURE]}
    with pytest.raises(ApiError) as err:
        tenant.post(pods.PODS, pods.pod("replay", pods.container("main", 20), annotations=copied))
    _refused(err)


def test_faked_admitted_is_refused(tenant: Rest) -> None:
    tenant.post(pods.PODS, unscheduled("plain"))
    with pytest.raises(ApiError) as err:
        tenant.merge_patch(f"{pods.PODS}/plain", {"metadata": {"annotations": {ADMITTED: "[]"}}})
    _refused(err)


@pytest.mark.parametrize("resource", ["pods/binding", "bindings"])
def test_binding_with_assignment_is_refused(tenant: Rest, resource: str) -> None:
    tenant.post(pods.PODS, unscheduled("bindme"))
    body = _binding("bindme", "node-a", {ASSIGNMENT: '{"v":1}', SIGNATURE: "00" * 32})
    path = (
        f"{pods.PODS}/bindme/binding"
        if resource == "pods/binding"
        else (f"/api/v1/namespaces/{pods.NS}/bindings")
    )
    with pytest.raises(ApiError) as err:
        tenant.post(path, body)
    _refused(err)


def test_assignment_through_pod_status_is_refused(tenant: Rest) -> None:
    tenant.post(pods.PODS, unscheduled("statusme"))
    patch = {"metadata": {"annotations": {ASSIGNMENT: '{"v":1}', SIGNATURE: "00" * 32}}}
    with pytest.raises(ApiError) as err:
        tenant.merge_patch(f"{pods.PODS}/statusme/status", patch)
    _refused(err)


def test_user_without_binding_rights_cannot_bind(real_cluster: RealCluster, tenant: Rest) -> None:
    tenant.post(pods.PODS, unscheduled("nobind"))
    reader = _user(real_cluster, "reader", [TENANT_RULES[0]])
    with pytest.raises(ApiError) as err:
        reader.post(f"{pods.PODS}/nobind/binding", _binding("nobind", "node-a", {}))
    assert err.value.status == 403
    reader.close()


def _agent_of(cluster: RealCluster, node: str) -> Rest:
    """The node agent's identity on `node`, as the harness starts the agent with it."""
    path = cluster.agent_kubeconfig(node)
    token = next(
        line.split("token:", 1)[1].strip()
        for line in path.read_text().splitlines()
        if "token:" in line
    )
    return Rest(cluster.server, str(cluster.pki / "ca.crt"), Identity("agent", token=token))


def test_a_node_agent_may_annotate_only_its_own_node(real_cluster: RealCluster) -> None:
    agent_b = _agent_of(real_cluster, "node-b")
    note = {"metadata": {"annotations": {"vgpu.io/probe": "b"}}}
    agent_b.merge_patch("/api/v1/nodes/node-b", note)  # its own: allowed
    with pytest.raises(ApiError) as err:
        agent_b.merge_patch("/api/v1/nodes/node-a", note)
    assert err.value.status == 403 and "own Node" in err.value.message


def test_a_node_agent_may_not_write_admitted_on_another_nodes_pod(
    real_cluster: RealCluster,
) -> None:
    real_cluster.admin.post(pods.PODS, pods.pod("on-a", pods.container("main", 10)))
    bound = pods.wait_running(real_cluster.admin, "on-a")
    other = "node-b" if bound["spec"]["nodeName"] == "node-a" else "node-a"
    with pytest.raises(ApiError) as err:
        _agent_of(real_cluster, other).merge_patch(
            f"{pods.PODS}/on-a", {"metadata": {"annotations": {ADMITTED: "[]"}}}
        )
    assert err.value.status == 403
