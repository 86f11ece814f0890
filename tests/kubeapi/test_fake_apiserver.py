"""The fake API server, exercised only through the real `kubernetes` client over HTTP."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import FakeApiServer

NS = "default"


def make_pod(name: str, labels: dict[str, str] | None = None, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
        "spec": spec,
    }


def make_node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


def binding(pod: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "annotations": annotations or {}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def status_of(err: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(err.body)
    return body


@pytest.fixture
def core(kube_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


@pytest.fixture
def custom(kube_client: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_client)


# ----- CRUD -------------------------------------------------------------------------------------
def test_create_assigns_identity_and_increasing_resource_versions(core: client.CoreV1Api) -> None:
    a = core.create_namespaced_pod(NS, make_pod("a"))
    b = core.create_namespaced_pod(NS, make_pod("b"))
    assert a.metadata.uid and a.metadata.uid != b.metadata.uid
    assert a.metadata.creation_timestamp is not None
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)
    assert core.read_namespaced_pod("a", NS).status.phase == "Pending"


def test_create_twice_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, make_pod("a"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(NS, make_pod("a"))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"
    assert status_of(err.value)["kind"] == "Status"


def test_missing_object_is_404_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.read_node("nope")
    assert err.value.status == 404
    assert status_of(err.value)["reason"] == "NotFound"


def test_generate_name_and_pagination(core: client.CoreV1Api) -> None:
    for _ in range(5):
        core.create_namespaced_pod(NS, {**make_pod(""), "metadata": {"generateName": "w-"}})
    first = core.list_namespaced_pod(NS, limit=2)
    assert len(first.items) == 2 and first.metadata._continue
    rest = core.list_namespaced_pod(NS, limit=10, _continue=first.metadata._continue)
    names = [p.metadata.name for p in first.items + rest.items]
    assert len(set(names)) == 5 and all(n.startswith("w-") for n in names)
    assert rest.metadata._continue is None


def test_delete_emits_object_and_honours_preconditions(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    node = core.create_node(make_node("n1"))
    with pytest.raises(ApiException) as err:
        core.delete_node("n1", body={"preconditions": {"uid": "wrong"}})
    assert err.value.status == 409
    core.delete_node("n1", body={"preconditions": {"uid": node.metadata.uid}})
    assert kube_server.store.get("Node", None, "n1") is None


# ----- selectors --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("gpu=a100", ["n1"]),
        ("gpu==a100", ["n1"]),
        ("gpu!=a100", ["n2", "n3"]),
        ("gpu in (a100,h100)", ["n1", "n2"]),
        ("gpu notin (a100)", ["n2", "n3"]),
        ("gpu", ["n1", "n2"]),
        ("!gpu", ["n3"]),
        ("gpu,zone=b", ["n2"]),
    ],
    ids=["eq", "eqeq", "neq", "in", "notin", "exists", "not-exists", "and"],
)
def test_label_selectors(core: client.CoreV1Api, selector: str, expected: list[str]) -> None:
    core.create_node(make_node("n1", {"gpu": "a100", "zone": "a"}))
    core.create_node(make_node("n2", {"gpu": "h100", "zone": "b"}))
    core.create_node(make_node("n3", {"zone": "b"}))
    got = core.list_node(label_selector=selector).items
    assert [n.metadata.name for n in got] == expected


def test_field_selectors(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, make_pod("bound", node="n1"))
    core.create_namespaced_pod(NS, make_pod("unbound"))
    core.create_namespaced_pod(
        "other", {**make_pod("elsewhere", node="n1"), "metadata": {"name": "elsewhere"}}
    )

    def names(**kw: Any) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**kw).items]

    assert names(field_selector="spec.nodeName=n1") == ["bound", "elsewhere"]
    assert names(field_selector="spec.nodeName=") == ["unbound"]
    assert names(field_selector="spec.nodeName=n1,metadata.namespace!=other") == ["bound"]
    assert names(field_selector="metadata.name=unbound,status.phase=Pending") == ["unbound"]
    with pytest.raises(ApiException) as err:
        names(field_selector="spec.hostname=x")
    assert err.value.status == 400


# ----- updates and optimistic concurrency --------------------------------------------------------
def test_replace_with_stale_resource_version_is_409(core: client.CoreV1Api) -> None:
    node = core.create_node(make_node("n1"))
    fresh = core.replace_node(
        "n1",
        {
            **make_node("n1", {"a": "1"}),
            "metadata": {
                "name": "n1",
                "labels": {"a": "1"},
                "resourceVersion": node.metadata.resource_version,
            },
        },
    )
    assert fresh.metadata.labels == {"a": "1"}
    stale = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "resourceVersion": node.metadata.resource_version},
    }
    with pytest.raises(ApiException) as err:
        core.replace_node("n1", stale)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"


def test_patch_types(core: client.CoreV1Api, kube_server: FakeApiServer) -> None:
    core.create_node(make_node("n1", {"keep": "1", "drop": "1"}))
    core.patch_node("n1", {"metadata": {"labels": {"new": "1"}}})  # dict → strategic merge
    assert kube_server.requests[-1].content_type == "application/strategic-merge-patch+json"
    core.patch_node(
        "n1", {"metadata": {"labels": {"drop": None}}}, _content_type="application/merge-patch+json"
    )
    core.patch_node(
        "n1",
        [
            {"op": "add", "path": "/metadata/annotations", "value": {}},
            {"op": "add", "path": "/metadata/annotations/example.com~1gpu", "value": "2"},
        ],
    )
    node = kube_server.store.get("Node", None, "n1")
    assert node is not None
    assert node["metadata"]["labels"] == {"keep": "1", "new": "1"}
    assert node["metadata"]["annotations"] == {"example.com/gpu": "2"}


def test_patch_with_stale_resource_version_is_409(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod(NS, make_pod("a"))
    rv = pod.metadata.resource_version
    core.patch_namespaced_pod(
        "a", NS, {"metadata": {"resourceVersion": rv, "annotations": {"x": "1"}}}
    )
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod(
            "a", NS, {"metadata": {"resourceVersion": rv, "annotations": {"x": "2"}}}
        )
    assert err.value.status == 409
    assert core.read_namespaced_pod("a", NS).metadata.annotations == {"x": "1"}


def test_noop_patch_keeps_resource_version(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod(NS, make_pod("a", {"x": "1"}))
    again = core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"x": "1"}}})
    assert again.metadata.resource_version == pod.metadata.resource_version


def test_status_subresource_is_separate(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, make_pod("a"))
    core.patch_namespaced_pod("a", NS, {"status": {"phase": "Running"}})  # ignored on main
    assert core.read_namespaced_pod("a", NS).status.phase == "Pending"
    core.patch_namespaced_pod_status(
        "a",
        NS,
        {
            "status": {"phase": "Running"},
            "metadata": {"labels": {"kept": "1"}},
            "spec": {"schedulerName": "ignored"},
        },
    )
    pod = core.read_namespaced_pod("a", NS)
    assert pod.status.phase == "Running"
    assert pod.spec.scheduler_name != "ignored"
    # A pod status write keeps label and annotation changes, as the real API server does (so
    # whoever may write pods/status can change a pod's annotations).
    assert pod.metadata.labels == {"kept": "1"}


def test_custom_objects_reject_strategic_merge(custom: client.CustomObjectsApi) -> None:
    group = ("scheduling.x-k8s.io", "v1alpha1", NS, "podgroups")
    custom.create_namespaced_custom_object(
        *group,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 2},
        },
    )
    got = custom.patch_namespaced_custom_object(*group, "g", {"spec": {"minMember": 3}})
    assert got["spec"]["minMember"] == 3 and got["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(
            *group,
            "g",
            {"spec": {"minMember": 4}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415


def test_lease_microtime_needs_six_fraction_digits(custom: client.CustomObjectsApi) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "renewTime": "2026-01-01T00:00:00Z"},
    }
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object("coordination.k8s.io", "v1", NS, "leases", lease)
    assert err.value.status == 400
    lease["spec"]["renewTime"] = "2026-01-01T00:00:00.000000Z"
    custom.create_namespaced_custom_object("coordination.k8s.io", "v1", NS, "leases", lease)


# ----- binding ----------------------------------------------------------------------------------
def test_binding_sets_node_and_merges_annotations(core: client.CoreV1Api) -> None:
    pod = make_pod("a")
    pod["metadata"]["annotations"] = {"existing": "1"}
    core.create_namespaced_pod(NS, pod)
    resp = core.create_namespaced_pod_binding(
        "a", NS, binding("a", "n1", {"vgpu/assign": "gpu0"}), _preload_content=False
    )
    assert resp.status == 201
    assert json.loads(resp.data)["status"] == "Success"
    got = core.read_namespaced_pod("a", NS)
    assert got.spec.node_name == "n1"
    assert got.metadata.annotations == {"existing": "1", "vgpu/assign": "gpu0"}
    assert [(c.type, c.status) for c in got.status.conditions] == [("PodScheduled", "True")]


def test_second_binding_is_409_and_changes_nothing(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, make_pod("a"))
    core.create_namespaced_pod_binding("a", NS, binding("a", "n1"), _preload_content=False)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding(
            "a", NS, binding("a", "n2", {"x": "1"}), _preload_content=False
        )
    assert err.value.status == 409
    got = core.read_namespaced_pod("a", NS)
    assert got.spec.node_name == "n1" and not got.metadata.annotations


# ----- watch ------------------------------------------------------------------------------------
def test_watch_replays_changes_after_resource_version(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, make_pod("a", {"app": "x"}))
    core.patch_namespaced_pod("a", NS, {"metadata": {"annotations": {"k": "v"}}})
    core.create_namespaced_pod(NS, make_pod("b", {"app": "y"}))  # filtered out
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"app": "z"}}})  # leaves selector
    w = watch.Watch()
    got = []
    for event in w.stream(
        core.list_namespaced_pod,
        NS,
        resource_version=start,
        label_selector="app=x",
        timeout_seconds=5,
    ):
        got.append((event["type"], event["object"].metadata.name))
        if len(got) == 3:
            w.stop()
    assert got == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_watch_streams_live_events(core: client.CoreV1Api) -> None:
    start = core.list_node().metadata.resource_version

    def writer() -> None:
        time.sleep(0.1)
        core.create_node(make_node("n1"))
        core.delete_node("n1")

    thread = threading.Thread(target=writer)
    thread.start()
    w = watch.Watch()
    got = []
    for event in w.stream(core.list_node, resource_version=start, timeout_seconds=5):
        got.append(event["type"])
        if len(got) == 2:
            w.stop()
    thread.join()
    assert got == ["ADDED", "DELETED"]


def test_watch_without_resource_version_starts_with_current_objects(
    core: client.CoreV1Api,
) -> None:
    core.create_node(make_node("n1"))
    w = watch.Watch()
    first = next(iter(w.stream(core.list_node, timeout_seconds=5)))
    w.stop()
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "n1")


def test_watch_from_compacted_version_is_410(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    old = core.list_node().metadata.resource_version
    core.create_node(make_node("n1"))
    kube_server.store.compact()
    with pytest.raises(ApiException) as err:  # ERROR event carrying a 410 Status
        list(watch.Watch().stream(core.list_node, resource_version=old, timeout_seconds=2))
    assert err.value.status == 410
    kube_server.watch_expired = "http"
    with pytest.raises(ApiException) as err:
        core.list_node(watch=True, resource_version=old, _preload_content=False)
    assert err.value.status == 410


def test_watch_sends_bookmarks_on_request(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    kube_server.bookmark_interval = 0.05
    rv = core.list_node().metadata.resource_version
    resp = core.list_node(
        watch=True,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=1,
        _preload_content=False,
    )
    line = next(iter(resp.stream(None)))
    resp.close()
    event = json.loads(line)
    assert event["type"] == "BOOKMARK"
    assert event["object"]["metadata"]["resourceVersion"] == rv


def test_end_watches_closes_streams_cleanly(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    threading.Timer(0.1, kube_server.store.end_watches).start()
    began = time.monotonic()
    resp = core.list_node(
        watch=True,
        resource_version=core.list_node().metadata.resource_version,
        _preload_content=False,
    )
    assert resp.read() == b""
    assert time.monotonic() - began < 5


# ----- fault injection and direct store access ----------------------------------------------------
def test_injected_status_applies_the_given_number_of_times(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    fault = kube_server.inject("POST", r"/namespaces/default/pods$", status=500, times=1)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(NS, make_pod("a"))
    assert err.value.status == 500
    assert status_of(err.value)["reason"] == "InternalError"
    core.create_namespaced_pod(NS, make_pod("a"))
    assert fault.hits == 1


def test_injected_conflict_on_bind(core: client.CoreV1Api, kube_server: FakeApiServer) -> None:
    core.create_namespaced_pod(NS, make_pod("a"))
    kube_server.inject("POST", r"/binding$", status=409, reason="Conflict")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("a", NS, binding("a", "n1"), _preload_content=False)
    assert err.value.status == 409
    assert not core.read_namespaced_pod("a", NS).spec.node_name


def test_injected_delay_makes_the_client_time_out(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    kube_server.inject("POST", r"/pods$", delay=0.5)
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.create_namespaced_pod(NS, make_pod("a"), _request_timeout=0.1)


def test_dropped_connection(core: client.CoreV1Api, kube_server: FakeApiServer) -> None:
    kube_server.inject("POST", r"/pods$", drop=True)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_namespaced_pod(NS, make_pod("a"))


def test_direct_store_access_is_visible_to_clients_and_watches(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    start = kube_server.store.resource_version
    kube_server.store.put(make_node("n1", {"a": "1"}))
    assert core.read_node("n1").metadata.labels == {"a": "1"}
    core.patch_node("n1", {"metadata": {"labels": {"b": "2"}}})
    stored = kube_server.store.get("Node", None, "n1")
    assert stored is not None and stored["metadata"]["labels"] == {"a": "1", "b": "2"}
    w = watch.Watch()
    types = []
    for event in w.stream(core.list_node, resource_version=start, timeout_seconds=5):
        types.append(event["type"])
        if len(types) == 2:
            w.stop()
    assert types == ["ADDED", "MODIFIED"]


def test_requests_are_recorded(core: client.CoreV1Api, kube_server: FakeApiServer) -> None:
    core.create_node(make_node("n1"))
    core.list_node(label_selector="a=b")
    create, listing = kube_server.requests
    assert (create.method, create.path, create.body["metadata"]["name"]) == (
        "POST",
        "/api/v1/nodes",
        "n1",
    )
    assert (listing.method, listing.query) == ("GET", {"labelSelector": "a=b"})


def test_watch_ends_at_timeout_seconds(core: client.CoreV1Api) -> None:
    rv = core.list_node().metadata.resource_version
    began = time.monotonic()
    resp = core.list_node(
        watch=True, resource_version=rv, timeout_seconds=1, _preload_content=False
    )
    assert resp.read() == b""
    assert 0.9 <= time.monotonic() - began < 5


def test_node_status_subresource(core: client.CoreV1Api) -> None:
    core.create_node(make_node("n1"))
    capacity = {"vgpu.io/core": "400", "vgpu.io/memory": "320"}
    core.patch_node_status("n1", {"status": {"capacity": capacity, "allocatable": capacity}})
    core.patch_node("n1", {"status": {"capacity": {"vgpu.io/core": None}}})  # ignored on main
    node = core.read_node("n1")
    assert node.status.capacity == capacity and node.status.allocatable == capacity
