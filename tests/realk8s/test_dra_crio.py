"""The DRA driver's CDI hook on a CRI-O node, from a tenant's side, on the real kubelet.

CRI-O sets no `io.kubernetes.cri.sandbox-uid`, and it writes a pod's own annotations into each
container's annotations before the kubelet's labels, `io.kubernetes.pod.uid` among them (the
fake runtime's `--annotations=cri-o`, hack/testcluster/fakecri_hooks.go, cites CRI-O's code).
So the hook must find the pod by the kubelet's label, and a tenant who may only edit pods and
claims in its own namespace can put either key on its pod: one forged `sandbox-uid` naming the
claim's other pod must not get the driver to limit that pod and start the tenant's unlimited,
and a forged `io.kubernetes.pod.uid` is overwritten by the kubelet's label.

The cluster is `tests/realk8s/test_dra.py`'s with node-d's fake runtime in CRI-O's mode, and the
driver as `tests/realk8s/test_dra_driver_limits.py`'s `hooked` fixture runs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Rest
from tests.realk8s.standin_limits import LimitedGpus
from tests.realk8s.test_admission import _user
from tests.realk8s.test_dra import (
    CLAIMS,
    DraNode,
    allocation,
    claim,
    claim_pod,
    dra_cluster,
    release,
    uuid_of,
)
from tests.realk8s.test_dra_dir_bounds import CLAIM_EDITOR
from tests.realk8s.test_dra_driver_limits import (
    _app_running,
    _backends,
    _limit_or_zero,
    _start_error,
    hooked,
    limited,
    test_a_pod_joining_a_prepared_shared_claim_starts_only_once_its_limit_is_set,
)

pytestmark = pytest.mark.realk8s
__all__ = [  # the fixtures, used by name, and the test that runs here under CRI-O too
    "hooked",
    "limited",
    "test_a_pod_joining_a_prepared_shared_claim_starts_only_once_its_limit_is_set",
]
GIB = 1 << 30


@pytest.fixture(scope="module")
def dra(realk8s_binary: Path) -> Iterator[DraNode]:
    with dra_cluster(realk8s_binary, annotations="cri-o") as node:
        yield node


@pytest.fixture
def tenant(dra: DraNode) -> Iterator[Rest]:
    rest = _user(dra.cluster, "crio-claims-editor", CLAIM_EDITOR)  # edits its namespace only
    yield rest
    rest.close()


@dataclass(frozen=True)
class Joiner:
    """The tenant's second pod of a shared claim, its annotation `key` naming the first pod."""

    name: str
    uid: str
    cgroup: Path
    gpu: str  # the claim's GPU's UUID


@contextmanager
def joining(dra: DraNode, limited: LimitedGpus, tenant: Rest, key: str) -> Iterator[Joiner]:
    """A claim prepared for its first pod, running with its limit; then the joiner, with its
    own cgroup made (so that only its annotation can refuse it); both released after. The claim
    is a whole GPU: one of part of a GPU is used by one pod at a time (`vgpu.dra.pod_limits`,
    `sharing_refusal`), which would refuse the joiner whatever its annotations."""
    api, name = dra.cluster.admin, key.rsplit(".", 1)[-1]
    wait_until(lambda: _backends(dra) == {"driver"}, 30, "the slice to say memoryBackend driver")
    tenant.post(CLAIMS, claim(name))
    try:
        first = tenant.post(pods.PODS, claim_pod(f"{name}-first", name))["metadata"]["uid"]
        limited.pod_cgroup(first)
        pods.wait_running(api, f"{name}-first", timeout=90)
        pod = claim_pod(f"{name}-joiner", name)
        pod["metadata"]["annotations"] = {key: first}
        uid = str(tenant.post(pods.PODS, pod)["metadata"]["uid"])
        gpu = uuid_of(api, allocation(api, name)[0]["device"])
        yield Joiner(f"{name}-joiner", uid, limited.pod_cgroup(uid), gpu)
    finally:
        release(api, f"{name}-joiner")
        release(api, f"{name}-first", name)


def test_a_forged_sandbox_uid_naming_the_claims_other_pod_does_not_start_the_container(
    dra: DraNode, limited: LimitedGpus, tenant: Rest
) -> None:
    with joining(dra, limited, tenant, "io.kubernetes.cri.sandbox-uid") as joiner:
        refused = wait_until(lambda: _start_error(dra, joiner.name), 60, "the hook to refuse")
        assert "name different pods" in refused and joiner.uid in refused, refused
        assert not _app_running(dra, joiner.name)
        assert _limit_or_zero(limited, joiner.cgroup, joiner.gpu) == 0


def test_a_forged_pod_uid_annotation_is_overwritten_by_the_kubelets_label(
    dra: DraNode, limited: LimitedGpus, tenant: Rest
) -> None:
    with joining(dra, limited, tenant, "io.kubernetes.pod.uid") as joiner:
        wait_until(lambda: _app_running(dra, joiner.name), 90, "its container started")
        assert limited.hard_limit(joiner.cgroup, joiner.gpu) == 80 * GIB  # its own cgroup's
