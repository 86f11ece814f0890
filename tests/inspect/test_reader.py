"""Reading a live cluster through KubeApi against the fake API server over real HTTP."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.inspect.builders import node, pod
from tests.kubeapi import FakeApiServer
from vgpu.adapters.kube.calls import KubeApi
from vgpu.inspect.build import build_report
from vgpu.inspect.queues_cmd import read_config_map
from vgpu.inspect.reader import InspectError, connect, read_snapshot

T4 = ("Tesla T4", 15360)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kube(kube_client: Any) -> KubeApi:
    return KubeApi(kube_client, request_timeout=2.0)


def test_reads_nodes_live_pods_and_named_pod_groups(
    kube_server: FakeApiServer, kube: KubeApi
) -> None:
    store = kube_server.store
    store.put(node("n1", [T4, T4]))
    store.put(node("cpu", None))
    store.put(pod("a/run", node="n1", asks={"m": (30, 0)}, shares={"m": [(0, 30, 4608)]}))
    store.put(pod("a/done", node="n1", shares={"m": [(1, 100, 15360)]}, phase="Succeeded"))
    store.put(pod("a/g0", phase="Pending", labels={"scheduling.x-k8s.io/pod-group": "pg"}))
    store.put(pod("a/g1", phase="Pending", labels={"scheduling.x-k8s.io/pod-group": "missing"}))
    store.put(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "a"},
            "spec": {"minMember": 2},
        }
    )
    snap = read_snapshot(kube, now=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert snap.taken_at == "2025-01-02T03:04:05Z"
    assert sorted(p["metadata"]["name"] for p in snap.pods) == ["g0", "g1", "run"]
    assert [g["metadata"]["name"] for g in snap.pod_groups] == ["pg"]
    r = build_report(snap)
    assert r.totals.cores_used == 30 and r.without_vgpu == ("cpu",)
    assert {g.key: g.min_member for g in r.gangs} == {"a/missing": None, "a/pg": 2}


def test_forbidden_says_how_to_get_permission(kube_server: FakeApiServer, kube: KubeApi) -> None:
    kube_server.inject("GET", r"/api/v1/nodes", status=403)
    with pytest.raises(InspectError, match=r"no permission.*clusterrole=vgpu-inspect"):
        read_snapshot(kube)


def test_unreachable_server_is_a_clear_error(kube_server: FakeApiServer, kube: KubeApi) -> None:
    kube_server.stop()
    with pytest.raises(InspectError, match="cannot reach the Kubernetes API server"):
        read_snapshot(kube)


def test_no_credentials(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    with pytest.raises(InspectError, match="no cluster to inspect"):
        connect(None)


def verb_of(method: str, path: str) -> tuple[str, str, str]:
    """(apiGroup, resource, verb) of a request, enough for the paths the reader uses."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    verb = {"GET": "get" if len(rest) > 1 else "list"}[method]
    return group, rest[0], verb


def test_reader_needs_only_the_vgpu_inspect_cluster_role(
    kube_server: FakeApiServer, kube: KubeApi
) -> None:
    kube_server.store.put(node("n1", [T4]))
    kube_server.store.put(
        pod("a/g0", phase="Pending", labels={"scheduling.x-k8s.io/pod-group": "pg"})
    )
    read_snapshot(kube)
    read_config_map(kube, "vgpu-system/vgpu-queues")  # --queues
    used = {verb_of(r.method, r.path) for r in kube_server.requests}
    role = yaml.safe_load((ROOT / "daemonset" / "rbac" / "inspect.yaml").read_text())
    granted = {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert used == granted


def _lease(renewed: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "vgpu-extender", "namespace": "vgpu-system"},
        "spec": {"holderIdentity": "ext-0", "leaseDurationSeconds": 15, "renewTime": renewed},
    }


def test_reads_the_extenders_lease_and_the_invalid_pod_events(
    kube_server: FakeApiServer, kube: KubeApi
) -> None:
    store = kube_server.store
    store.put(node("n1", [T4]))
    store.put(pod("a/bad", phase="Pending", asks={"m": (30, 0)}))
    store.put(_lease("2025-01-02T03:04:00.000000Z"))
    kube.create_event(
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "bad", "namespace": "a"}},
        reason="InvalidPod",
        message="vgpu extender cannot schedule this pod: bad gang size",
        event_type="Warning",
    )
    kube.create_event(
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "bad", "namespace": "a"}},
        reason="Scheduled",
        message="not this one",
    )
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    snap = read_snapshot(kube, now=now)
    assert [e["reason"] for e in snap.events] == ["InvalidPod"]
    r = build_report(snap)
    assert r.extender is not None and r.extender.up and r.extender.holder == "ext-0"
    assert [p.message for p in r.problems] == [
        "the extender refuses it: vgpu extender cannot schedule this pod: bad gang size"
    ]


def test_a_missing_lease_is_an_extender_down_and_a_forbidden_one_is_unknown(
    kube_server: FakeApiServer, kube: KubeApi
) -> None:
    kube_server.store.put(node("n1", [T4]))
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    down = build_report(read_snapshot(kube, now=now))
    assert down.extender is not None and not down.extender.found
    assert [p.subject for p in down.problems] == ["extender"]
    kube_server.inject("GET", r"/leases/", status=403)
    unknown = build_report(read_snapshot(kube, now=now))
    assert unknown.extender is None and unknown.problems == ()
