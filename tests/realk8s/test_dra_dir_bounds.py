"""The DRA driver's claim directories (mode vgpu-core) on the real scheduler and kubelet: past
its namespace's bound, a namespace's next claim is refused at prepare with the bound named (the
kubelet reports it on the pod), while another namespace's claim is still prepared and its pod
runs. The owner of a claim's directory is the pod the real scheduler reserved it for.

The cluster is `tests/realk8s/test_dra.py`'s (its `dra` fixture, a cluster of its own here)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realk8s import manifests, pods
from tests.realk8s.binary import build_interposer
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Obj
from tests.realk8s.test_admission import _user
from tests.realk8s.test_dra import CLAIMS, DraNode, claim, claim_pod, dra, release
from tests.realk8s.test_dra_driver_limits import wait_prepare_refused
from tests.realk8s.test_tenant import OTHER, OTHER_TEAM

pytestmark = pytest.mark.realk8s
__all__ = ["dra"]  # the fixture, used by name


@pytest.fixture(scope="module")
def bounded(dra: DraNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DraNode]:
    """The DRA node's driver in mode vgpu-core with room for two claim directories per
    namespace (one per pod); the tier's driver after."""
    out = tmp_path_factory.mktemp("dra-dirs")
    library = build_interposer(out / "lib")
    flags = (
        "--mode=vgpu-core",
        f"--vgpu-core-library={library}",
        f"--state-dir={out / 'state'}",
        "--max-container-dirs-per-pod=1",
        "--max-container-dirs-per-namespace=2",
    )
    manifests.create(dra.cluster.admin, OTHER_TEAM)
    account = {"name": "default", "namespace": OTHER}  # no controller manager makes it here
    manifests.create(
        dra.cluster.admin, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account}
    )
    dra.stop_driver()
    dra.start_driver(*flags)
    try:
        yield dra
    finally:
        dra.stop_driver()
        dra.start_driver()


def _in(namespace: str, obj: Obj) -> Obj:
    """`obj` in `namespace`; a pod there mounts no API token (no controller manager publishes
    the namespace's `kube-root-ca.crt` in this cluster)."""
    out = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    if obj["kind"] == "Pod":
        out["spec"] = {**obj["spec"], "automountServiceAccountToken": False}
    return out


CLAIM_EDITOR = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]},
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims"],
        "verbs": ["create", "get", "list", "delete"],
    },
]
"""A team's editor: pods and claims in its own namespace, nothing else."""


def test_a_namespace_past_its_claim_directories_is_refused_and_another_still_runs(
    bounded: DraNode,
) -> None:
    api = bounded.cluster.admin
    tenant = _user(bounded.cluster, "claims-editor", CLAIM_EDITOR)  # edits its namespace only
    other_claims = CLAIMS.replace("/default/", f"/{OTHER}/")
    other_pods = pods.PODS.replace("/default/", f"/{OTHER}/")
    names = ("dirs-0", "dirs-1", "dirs-2")
    try:
        for name in names[:2]:
            tenant.post(CLAIMS, claim(name, cores="10", memory="4Gi"))
            tenant.post(pods.PODS, claim_pod(name, name))
            pods.wait_running(api, name, timeout=90)
        tenant.post(CLAIMS, claim(names[2], cores="10", memory="4Gi"))
        tenant.post(pods.PODS, claim_pod(names[2], names[2]))
        wait_prepare_refused(
            bounded, names[2], "for namespace default (the bound is 2 per namespace)"
        )
        api.post(other_claims, _in(OTHER, claim("theirs", cores="10", memory="4Gi")))
        api.post(other_pods, _in(OTHER, claim_pod("theirs", "theirs")))
        wait_until(
            lambda: api.get(f"{other_pods}/theirs").get("status", {}).get("phase") == "Running",
            90,
            "the other namespace's pod running",
        )
        phases = {n: api.get(f"{pods.PODS}/{n}").get("status", {}).get("phase") for n in names}
        assert phases == {"dirs-0": "Running", "dirs-1": "Running", "dirs-2": "Pending"}, phases
    finally:
        tenant.close()
        for path in (f"{other_pods}/theirs", f"{other_claims}/theirs"):
            try:
                api.delete(path)
            except ApiError as err:
                if err.status != 404:
                    raise
        for name in names:
            release(api, name, name)
