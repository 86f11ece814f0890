"""The shipped `vgpu-refuse-impossible-asks` policy on the real API server: it accepts the
policy's CEL (Kubernetes' quantity library included) without type-checking warnings, and refuses
a pod asking 150 cores at creation in the words `kubectl inspect vgpu` prints under Problems,
reading the canonical form the API server writes ("1k" for 1000 cores). Needs only the API
server; tests/deploy/test_ask_policy.py runs the same CEL against the report's Python."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realk8s import manifests, pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Obj

pytestmark = pytest.mark.realk8s

POLICY = Path(__file__).resolve().parents[2] / "daemonset" / "ask-policy.yaml"
PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"


def _refused(cluster: RealCluster, pod: Obj) -> str:
    try:
        cluster.admin.post(pods.PODS, pod)
    except ApiError as err:
        assert err.status in (403, 422), err
        return err.message
    cluster.admin.delete(f"{pods.PODS}/{pod['metadata']['name']}")
    return ""


@pytest.fixture(scope="module")
def policed(real_apiserver: RealCluster) -> Iterator[RealCluster]:
    applied = manifests.apply_file(real_apiserver.admin, POLICY)
    probe = pods.pod("probe", pods.container("main", 150))
    wait_until(lambda: bool(_refused(real_apiserver, probe)), 60, "the policy to take effect")
    try:
        yield real_apiserver
    finally:
        for obj in reversed(applied):
            real_apiserver.admin.delete(manifests.object_path(obj))


def test_the_api_server_type_checks_the_policy_cleanly(policed: RealCluster) -> None:
    policy = policed.admin.get(f"{PATH}/vgpu-refuse-impossible-asks")
    warnings = (policy.get("status", {}).get("typeChecking") or {}).get("expressionWarnings")
    assert not warnings, warnings


def test_150_cores_are_refused_in_the_reports_words(policed: RealCluster) -> None:
    message = _refused(policed, pods.pod("p150", pods.container("main", 150)))
    assert (
        "vGPU pod: can never be scheduled: invalid asks: spec.containers[0].resources[cores]: "
        "150 is more than one GPU but not a multiple of 100" in message
    ), message


def test_memory_without_cores_and_too_many_gpus_are_refused(policed: RealCluster) -> None:
    message = _refused(policed, pods.pod("mem", pods.container("main", 0, memory=8)))
    assert "GPU memory asked without GPU cores" in message, message
    message = _refused(policed, pods.pod("big", pods.container("main", 1000)))  # "1k"
    assert "container main asks 10 whole GPUs; the largest node has 8" in message, message


def test_valid_asks_are_admitted(policed: RealCluster) -> None:
    assert _refused(policed, pods.pod("ok", pods.container("main", 30, memory=8))) == ""
    assert _refused(policed, pods.pod("two", pods.container("main", 200))) == ""
