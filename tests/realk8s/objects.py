"""Objects the test cluster creates besides the shipped manifests."""

from __future__ import annotations

from tests.realk8s.rest import Obj

# A minimal stand-in for scheduler-plugins' PodGroup CRD: the group, version, kind and the
# fields vgpu reads (spec.minMember); the rest of the schema is left open.
POD_GROUP_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {
        "group": "scheduling.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "plural": "podgroups",
            "singular": "podgroup",
            "kind": "PodGroup",
            "shortNames": ["pg"],
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {"minMember": {"type": "integer"}},
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


def cluster_role_binding(account: str, role: str, namespace: str) -> Obj:
    """Grant a ClusterRole to a service account, as an operator would for `kubectl inspect`."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{role}-{account}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
