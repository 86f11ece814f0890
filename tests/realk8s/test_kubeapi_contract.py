"""The fake API server's contract tests (tests/kubeapi), run against the real kube-apiserver.

Only the tests that speak to the server through the client alone are rerun here (the others
reach into the fake's store or inject faults, which is what the fake remains for). Where the
real server answers differently, the fake is what gets fixed.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.kubeapi import test_fake_apiserver as contract
from tests.realk8s import manifests, pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.rest import ApiError

pytestmark = pytest.mark.realk8s

CLIENT_ONLY = {"core", "custom", "selector", "expected"}
TESTS = {
    name: fn
    for name, fn in vars(contract).items()
    if name.startswith("test_") and set(inspect.signature(fn).parameters) <= CLIENT_ONLY
}
globals().update(TESTS)  # collected here as this module's tests, with the fixtures below


def _clean(cluster: RealCluster) -> None:
    """Leave the default namespace and the node list as the contract tests expect them."""
    admin = cluster.admin
    manifests.create(
        admin, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}
    )  # the fake creates namespaces on first use; the real server needs them to exist
    manifests.create(
        admin,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": "other"},
        },
    )  # what kube-controller-manager would create
    pods.delete_all(admin)
    pods.delete_all(admin, "other")
    for node in admin.get("/api/v1/nodes")["items"]:
        if node["metadata"]["name"] not in cluster.nodes:
            admin.delete(f"/api/v1/nodes/{node['metadata']['name']}")
    for path in (
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
    ):
        for item in admin.get(path)["items"]:
            try:
                admin.delete(f"{path}/{item['metadata']['name']}")
            except ApiError as err:
                if err.status != 404:
                    raise


@pytest.fixture
def kube_client(real_apiserver: RealCluster) -> Iterator[Any]:
    real_cluster = real_apiserver
    _clean(real_cluster)
    config = client.Configuration()
    config.host = real_cluster.server
    config.ssl_ca_cert = str(real_cluster.pki / "ca.crt")
    config.cert_file = str(real_cluster.pki / "admin.crt")
    config.key_file = str(real_cluster.pki / "admin.key")
    api_client = client.ApiClient(config)
    yield api_client
    api_client.close()  # type: ignore[no-untyped-call]
    _clean(real_cluster)


@pytest.fixture
def core(kube_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


@pytest.fixture
def custom(kube_client: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_client)


def test_contract_tests_were_found() -> None:
    assert len(TESTS) >= 15, sorted(TESTS)
    assert manifests.plural("PodGroup") == "podgroups"
