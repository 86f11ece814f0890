"""KubeApi against the fake API server over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.kubeapi import FakeApiServer
from tests.pods import pod_obj
from vgpu.adapters.kube.calls import (
    KubeApi,
    KubeConfigMissing,
    KubeConflict,
    KubeForbidden,
    KubeInvalid,
    KubeNotFound,
    KubeUnavailable,
    microtime,
)
from vgpu.adapters.kube.reflector import WatchEvent
from vgpu.core.errors import VgpuError

NS = "default"


def pod(
    name: str, labels: dict[str, str] | None = None, node: str = "", ns: str = NS
) -> dict[str, Any]:
    main = {"name": "main", "image": "busybox"}
    return pod_obj(name, [main], namespace=ns, labels=labels or {}, node=node)


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


@pytest.fixture
def kube(kube_client: Any) -> KubeApi:
    return KubeApi(kube_client, request_timeout=2.0, page_size=2)


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    """Ends a test's watch generator (after the current 1 s server timeout) at teardown."""
    event = threading.Event()
    yield event
    event.set()


def take(events: Iterator[WatchEvent], n: int, stop: threading.Event) -> list[tuple[str, str]]:
    """The next `n` events, failing (not hanging) if they do not come within 5 s."""
    timer = threading.Timer(5.0, stop.set)
    timer.start()
    got: list[tuple[str, str]] = []
    try:
        for _ in range(n):
            event = next(events, None)
            if event is None:
                pytest.fail(f"watch ended after {got}; expected {n} events")
            got.append((event.type, event.object["metadata"].get("name", "")))
    finally:
        timer.cancel()
    return got


# ----- reads -----------------------------------------------------------------------------------
def test_list_pages_through_everything_with_one_resource_version(
    kube: KubeApi, kube_server: FakeApiServer
) -> None:
    for i in range(5):
        kube_server.store.put(pod(f"p{i}", {"app": "x" if i % 2 else "y"}, ns=f"ns{i % 2}"))
    listing = kube.list_pods()
    assert sorted(p["metadata"]["name"] for p in listing.items) == [f"p{i}" for i in range(5)]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in listing.items)
    assert listing.resource_version == kube_server.store.resource_version
    assert len([r for r in kube_server.requests if r.method == "GET"]) == 3  # pages of 2


def test_selectors_and_namespaces(kube: KubeApi, kube_server: FakeApiServer) -> None:
    kube_server.store.put(pod("a", {"app": "x"}, node="n1"))
    kube_server.store.put(pod("b", {"app": "y"}))
    kube_server.store.put(pod("c", {"app": "x"}, ns="other"))
    kube_server.store.put(node("n1", {"gpu": "yes"}))
    kube_server.store.put(node("n2"))

    def names(listing: Any) -> list[str]:
        return [o["metadata"]["name"] for o in listing.items]

    assert names(kube.list_pods(label_selector="app=x")) == ["a", "c"]
    assert names(kube.list_pods(NS, label_selector="app=x")) == ["a"]
    assert names(kube.list_pods(field_selector="spec.nodeName=n1")) == ["a"]
    assert names(kube.list_nodes(label_selector="gpu")) == ["n1"]
    assert kube.get_pod("other", "c")["metadata"]["namespace"] == "other"
    assert kube.get_node("n2")["kind"] == "Node"


def test_missing_object_is_kube_not_found(kube: KubeApi) -> None:
    with pytest.raises(KubeNotFound) as err:
        kube.get_node("ghost")
    assert isinstance(err.value, VgpuError)
    assert err.value.status == 404 and "ghost" in str(err.value)


# ----- writes ----------------------------------------------------------------------------------
def test_patch_node_metadata_sends_a_merge_patch(kube: KubeApi, kube_server: FakeApiServer) -> None:
    kube_server.store.put(node("n1", {"old": "1", "keep": "1"}))
    got = kube.patch_node_metadata(
        "n1", labels={"old": None, "new": "2"}, annotations={"vgpu/inventory": "{}"}
    )
    assert got["metadata"]["labels"] == {"keep": "1", "new": "2"}
    assert got["metadata"]["annotations"] == {"vgpu/inventory": "{}"}
    sent = kube_server.requests[-1]
    assert sent.content_type == "application/merge-patch+json"
    assert sent.body == {
        "metadata": {"labels": {"old": None, "new": "2"}, "annotations": {"vgpu/inventory": "{}"}}
    }


def test_patch_pod_annotations_with_resource_version_precondition(
    kube: KubeApi, kube_server: FakeApiServer
) -> None:
    rv = kube_server.store.put(pod("a"))["metadata"]["resourceVersion"]
    got = kube.patch_pod_annotations(NS, "a", {"x": "1"}, resource_version=rv)
    assert got["metadata"]["annotations"] == {"x": "1"}
    with pytest.raises(KubeConflict) as err:
        kube.patch_pod_annotations(NS, "a", {"x": "2"}, resource_version=rv)
    assert err.value.reason == "Conflict"
    kube.patch_pod_annotations(NS, "a", {"x": "3"})  # unconditional: last writer wins
    assert kube.get_pod(NS, "a")["metadata"]["annotations"] == {"x": "3"}


def test_bind_pod_records_annotations_atomically(kube: KubeApi, kube_server: FakeApiServer) -> None:
    created = kube_server.store.put(pod("a"))
    kube.bind_pod(
        NS, "a", "n1", annotations={"vgpu/assign": "gpu0:25"}, uid=created["metadata"]["uid"]
    )
    bound = kube.get_pod(NS, "a")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"] == {"vgpu/assign": "gpu0:25"}
    with pytest.raises(KubeConflict, match="already assigned"):
        kube.bind_pod(NS, "a", "n2")


def test_bind_pod_uid_precondition(kube: KubeApi, kube_server: FakeApiServer) -> None:
    kube_server.store.put(pod("a"))
    with pytest.raises(KubeConflict):
        kube.bind_pod(NS, "a", "n1", uid="someone-else")
    assert "nodeName" not in kube.get_pod(NS, "a")["spec"]


def test_create_event_for_pod_and_node(kube: KubeApi, kube_server: FakeApiServer) -> None:
    p = kube_server.store.put(pod("a", ns="team"))
    n = kube_server.store.put(node("n1"))
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    ev = kube.create_event(p, reason="Assigned", message="gpu0", now=moment)
    assert ev["metadata"]["namespace"] == "team"
    assert ev["involvedObject"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "name": "a",
        "namespace": "team",
        "uid": p["metadata"]["uid"],
    }
    # The typed client re-serialises Time fields; any RFC 3339 form is valid for them.
    assert datetime.fromisoformat(ev["firstTimestamp"]) == moment
    assert ev["source"]["component"] == "vgpu"
    node_ev = kube.create_event(n, reason="XidError", message="xid 79", event_type="Warning")
    assert node_ev["metadata"]["namespace"] == "default" and node_ev["type"] == "Warning"


def test_lease_round_trip_keeps_microtime_digits(kube: KubeApi) -> None:
    stamp = microtime(datetime(2026, 1, 1, tzinfo=UTC))  # microsecond == 0
    assert stamp == "2026-01-01T00:00:00.000000Z"
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "vgpu-extender", "namespace": NS},
        "spec": {"holderIdentity": "a", "renewTime": stamp, "leaseDurationSeconds": 15},
    }
    created = kube.create_lease(NS, lease)
    with pytest.raises(KubeConflict):
        kube.create_lease(NS, lease)
    current = kube.get_lease(NS, "vgpu-extender")
    assert current["spec"]["renewTime"] == stamp
    current["spec"]["holderIdentity"] = "b"
    kube.replace_lease(NS, "vgpu-extender", current)
    with pytest.raises(KubeConflict):  # still carries the old resourceVersion
        kube.replace_lease(NS, "vgpu-extender", created)


def test_get_pod_group(kube: KubeApi, kube_server: FakeApiServer) -> None:
    kube_server.store.put(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": NS},
            "spec": {"minMember": 4},
        }
    )
    assert kube.get_pod_group(NS, "g")["spec"]["minMember"] == 4
    with pytest.raises(KubeNotFound):
        kube.get_pod_group(NS, "h")


# ----- error translation -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, KubeUnavailable),
        (503, KubeUnavailable),
        (429, KubeUnavailable),
        (403, KubeForbidden),
        (401, KubeForbidden),
        (422, KubeInvalid),
        (409, KubeConflict),
    ],
    ids=["500", "503", "429", "403", "401", "422", "409"],
)
def test_status_codes_map_to_our_errors(
    kube: KubeApi, kube_server: FakeApiServer, status: int, error: type[Exception]
) -> None:
    kube_server.store.put(node("n1"))
    kube_server.inject("PATCH", "/nodes/n1", status=status, message="injected")
    with pytest.raises(error, match="injected"):
        kube.patch_node_metadata("n1", labels={"a": "1"})


def test_timeout_is_unavailable(kube_client: Any, kube_server: FakeApiServer) -> None:
    kube = KubeApi(kube_client, request_timeout=0.2)
    kube_server.store.put(pod("a"))
    kube_server.inject("POST", "/binding", delay=0.6)
    with pytest.raises(KubeUnavailable) as err:
        kube.bind_pod(NS, "a", "n1")
    assert err.value.status is None  # no reply at all


def test_refused_connection_is_unavailable(kube_server: FakeApiServer) -> None:
    api_client = kube_server.api_client()
    api_client.configuration.retries = 0
    kube_server.stop()
    with pytest.raises(KubeUnavailable):
        KubeApi(api_client, request_timeout=1.0).get_node("n1")
    api_client.close()


# ----- watch -----------------------------------------------------------------------------------
def test_watch_lists_then_streams_live_changes(
    stop: threading.Event, kube: KubeApi, kube_server: FakeApiServer
) -> None:
    kube_server.store.put(pod("a"))
    events = kube.watch_pods(NS, stop=stop, timeout_seconds=1)
    assert take(events, 2, stop) == [("ADDED", "a"), ("SYNCED", "")]
    threading.Timer(0.05, lambda: kube_server.store.put(pod("b"))).start()
    assert take(events, 1, stop) == [("ADDED", "b")]
    kube_server.store.remove("Pod", NS, "a")
    assert take(events, 1, stop) == [("DELETED", "a")]


def test_watch_resumes_from_last_version_after_stream_ends(
    stop: threading.Event, kube: KubeApi, kube_server: FakeApiServer
) -> None:
    kube_server.store.put(node("n1"))
    events = kube.watch_nodes(stop=stop, timeout_seconds=1)
    take(events, 2, stop)
    kube_server.store.put(node("n2"))
    assert take(events, 1, stop) == [("ADDED", "n2")]
    seen = kube_server.store.resource_version
    kube_server.store.end_watches()  # the server closes every stream
    kube_server.store.put(node("n3"))
    assert take(events, 1, stop) == [("ADDED", "n3")]  # no replay of n1/n2
    watches = [r for r in kube_server.requests if r.query.get("watch") == "true"]
    assert watches[-1].query["resourceVersion"] == seen
    lists = [r for r in kube_server.requests if r.method == "GET" and "watch" not in r.query]
    assert len(lists) == 1  # resumed, never relisted


@pytest.mark.parametrize("mode", ["event", "http"])
def test_watch_relists_on_410_and_emits_the_difference(
    stop: threading.Event, kube: KubeApi, kube_server: FakeApiServer, mode: str
) -> None:
    kube_server.watch_expired = mode  # type: ignore[assignment]
    kube_server.store.put(pod("a"))
    kube_server.store.put(pod("b"))
    events = kube.watch_pods(NS, stop=stop, timeout_seconds=1)
    assert take(events, 3, stop) == [("ADDED", "a"), ("ADDED", "b"), ("SYNCED", "")]
    kube_server.store.put({**pod("a"), "metadata": {**pod("a")["metadata"], "labels": {"v": "2"}}})
    kube_server.store.remove("Pod", NS, "b")
    kube_server.store.put(pod("c"))
    kube_server.store.compact()  # the watch the generator opens next is too old
    got = take(events, 4, stop)
    assert sorted(got[:3]) == [("ADDED", "c"), ("DELETED", "b"), ("MODIFIED", "a")]
    assert got[3] == ("SYNCED", "")


def test_a_relist_deletion_carries_the_last_object_seen(
    stop: threading.Event, kube: KubeApi, kube_server: FakeApiServer
) -> None:
    """The reflector keeps objects encoded; a DELETED found by a relist still carries the whole
    last version: from the listing (a) or from the watch stream (b)."""
    kube_server.watch_expired = "event"
    kube_server.store.put(pod("a", {"v": "1"}, node="n1"))
    kube_server.store.put(pod("b", {"v": "1"}))
    events = kube.watch_pods(NS, stop=stop, timeout_seconds=1)
    assert take(events, 3, stop) == [("ADDED", "a"), ("ADDED", "b"), ("SYNCED", "")]
    threading.Timer(0.05, lambda: kube_server.store.put(pod("b", {"v": "2"}, node="n2"))).start()
    last_b = next(events).object
    assert last_b["metadata"]["labels"] == {"v": "2"}
    kube_server.store.remove("Pod", NS, "a")
    kube_server.store.remove("Pod", NS, "b")
    kube_server.store.compact()
    deleted = {e.object["metadata"]["name"]: e.object for e in (next(events), next(events))}
    assert deleted["b"] == last_b
    assert deleted["a"]["metadata"]["labels"] == {"v": "1"}
    assert deleted["a"]["spec"]["nodeName"] == "n1"
    assert deleted["a"]["kind"] == "Pod"


def test_watch_retries_transient_errors(
    stop: threading.Event, kube_server: FakeApiServer, kube_client: Any
) -> None:
    kube = KubeApi(kube_client, request_timeout=2.0)
    kube_server.inject("GET", r"watch=true", status=503, times=2)
    kube_server.store.put(node("n1"))
    events = kube.watch_nodes(stop=stop, timeout_seconds=1, retry_delay=0.01)
    take(events, 2, stop)
    kube_server.store.put(node("n2"))
    assert take(events, 1, stop) == [("ADDED", "n2")]


def test_watch_forbidden_propagates(kube: KubeApi, kube_server: FakeApiServer) -> None:
    kube_server.inject("GET", r"/nodes", status=403, times=None)
    with pytest.raises(KubeForbidden):
        next(kube.watch_nodes(retry_delay=0.01))


def test_watch_stops_when_asked(kube: KubeApi, kube_server: FakeApiServer) -> None:
    kube_server.store.put(node("n1"))
    stop = threading.Event()
    events = kube.watch_nodes(stop=stop, timeout_seconds=5)
    assert next(events).type == "ADDED"
    stop.set()
    assert list(events) == []


# ----- configuration -----------------------------------------------------------------------------
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "%s"}}]
users: [{name: me, user: {token: t}}]
contexts: [{name: fake, context: {cluster: fake, user: me}}]
current-context: fake
"""


def test_from_environment_with_kubeconfig(
    kube_server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = tmp_path / "config"
    path.write_text(KUBECONFIG % kube_server.url)
    kube_server.store.put(node("n1"))
    kube = KubeApi.from_environment(str(path))
    assert kube.get_node("n1")["metadata"]["name"] == "n1"
    kube.close()
    monkeypatch.setenv("KUBECONFIG", str(path))
    kube = KubeApi.from_environment()
    assert kube.list_nodes().items
    kube.close()


def test_from_environment_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeConfigMissing, match="--kubeconfig"):
        KubeApi.from_environment()
    with pytest.raises(KubeConfigMissing, match=r"missing\.yaml"):
        KubeApi.from_environment(str(tmp_path / "missing.yaml"))
