"""The fake API server, exercised only through the real `kubernetes` client over HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import FakeApiServer
from tests.pods import pod_obj

NS = "default"


def make_pod(name: str, labels: dict[str, str] | None = None, node: str = "") -> dict[str, Any]:
    main = {"name": "main", "image": "busybox"}
    return pod_obj(name, [main], namespace=NS, labels=labels or {}, node=node)


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
    assert err.body is not None
    body: dict[str, Any] = json.loads(err.body)
    return body


# The client validates a dict body into its model class before sending (pydantic): these do the
# same step where the reader (and the type checker) can see it.
def as_pod(obj: dict[str, Any]) -> client.V1Pod:
    return client.V1Pod.model_validate(obj)


def as_node(obj: dict[str, Any]) -> client.V1Node:
    return client.V1Node.model_validate(obj)


def as_binding(obj: dict[str, Any]) -> client.V1Binding:
    return client.V1Binding.model_validate(obj)


def as_delete(obj: dict[str, Any]) -> client.V1DeleteOptions:
    return client.V1DeleteOptions.model_validate(obj)


class _Object(Protocol):
    metadata: client.V1ObjectMeta | None


class _List(Protocol):
    metadata: client.V1ListMeta | None


def meta(obj: _Object) -> client.V1ObjectMeta:
    """An object's metadata, which every object the server returns has."""
    assert obj.metadata is not None
    return obj.metadata


def name(obj: _Object) -> str:
    assert meta(obj).name is not None
    return str(meta(obj).name)


def list_meta(obj: _List) -> client.V1ListMeta:
    assert obj.metadata is not None
    return obj.metadata


def version(obj: _Object | _List) -> str:
    """An object's or a list's resourceVersion, which the server always sets."""
    assert obj.metadata is not None and obj.metadata.resource_version is not None
    return obj.metadata.resource_version


def pod_spec(pod: client.V1Pod) -> client.V1PodSpec:
    assert pod.spec is not None
    return pod.spec


def pod_status(pod: client.V1Pod) -> client.V1PodStatus:
    assert pod.status is not None
    return pod.status


def node_status(node: client.V1Node) -> client.V1NodeStatus:
    assert node.status is not None
    return node.status


def raw(reply: object) -> urllib3.BaseHTTPResponse:
    """With `_preload_content=False` the client returns the unread HTTP response, whatever the
    generated method's annotation says."""
    assert isinstance(reply, urllib3.BaseHTTPResponse), type(reply)
    return reply


def events(
    list_call: Callable[..., object], *args: object, limit: int | None = None, **kw: object
) -> list[dict[str, Any]]:
    """Events from the client's own `watch.Watch` over `list_call`, stopping after `limit` (the
    watch module is untyped; its calls are marked here once)."""
    w = watch.Watch()  # type: ignore[no-untyped-call]
    got: list[dict[str, Any]] = []
    for event in w.stream(list_call, *args, **kw):  # type: ignore[no-untyped-call]
        got.append(event)
        if len(got) == limit:
            w.stop()  # type: ignore[no-untyped-call]
    return got


@pytest.fixture
def core(kube_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


@pytest.fixture
def custom(kube_client: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_client)


# ----- CRUD -------------------------------------------------------------------------------------
def test_create_assigns_identity_and_increasing_resource_versions(core: client.CoreV1Api) -> None:
    a = core.create_namespaced_pod(NS, as_pod(make_pod("a")))
    b = core.create_namespaced_pod(NS, as_pod(make_pod("b")))
    assert meta(a).uid and meta(a).uid != meta(b).uid
    assert meta(a).creation_timestamp is not None
    assert int(version(b)) > int(version(a))
    assert pod_status(core.read_namespaced_pod("a", NS)).phase == "Pending"


def test_create_twice_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, as_pod(make_pod("a")))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(NS, as_pod(make_pod("a")))
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
        core.create_namespaced_pod(NS, as_pod({**make_pod(""), "metadata": {"generateName": "w-"}}))
    first = core.list_namespaced_pod(NS, limit=2)
    assert len(first.items) == 2 and list_meta(first)._continue
    rest = core.list_namespaced_pod(NS, limit=10, _continue=list_meta(first)._continue)
    names = [name(p) for p in first.items + rest.items]
    assert len(set(names)) == 5 and all(n.startswith("w-") for n in names)
    assert list_meta(rest)._continue is None


def test_delete_emits_object_and_honours_preconditions(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    node = core.create_node(as_node(make_node("n1")))
    with pytest.raises(ApiException) as err:
        core.delete_node("n1", body=as_delete({"preconditions": {"uid": "wrong"}}))
    assert err.value.status == 409
    core.delete_node("n1", body=as_delete({"preconditions": {"uid": meta(node).uid}}))
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
    core.create_node(as_node(make_node("n1", {"gpu": "a100", "zone": "a"})))
    core.create_node(as_node(make_node("n2", {"gpu": "h100", "zone": "b"})))
    core.create_node(as_node(make_node("n3", {"zone": "b"})))
    got = core.list_node(label_selector=selector).items
    assert [name(n) for n in got] == expected


def test_field_selectors(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, as_pod(make_pod("bound", node="n1")))
    core.create_namespaced_pod(NS, as_pod(make_pod("unbound")))
    core.create_namespaced_pod(
        "other", as_pod({**make_pod("elsewhere", node="n1"), "metadata": {"name": "elsewhere"}})
    )

    def names(**kw: Any) -> list[str]:
        return [name(p) for p in core.list_pod_for_all_namespaces(**kw).items]

    assert names(field_selector="spec.nodeName=n1") == ["bound", "elsewhere"]
    assert names(field_selector="spec.nodeName=") == ["unbound"]
    assert names(field_selector="spec.nodeName=n1,metadata.namespace!=other") == ["bound"]
    assert names(field_selector="metadata.name=unbound,status.phase=Pending") == ["unbound"]
    with pytest.raises(ApiException) as err:
        names(field_selector="spec.hostname=x")
    assert err.value.status == 400


# ----- updates and optimistic concurrency --------------------------------------------------------
def test_replace_with_stale_resource_version_is_409(core: client.CoreV1Api) -> None:
    node = core.create_node(as_node(make_node("n1")))
    fresh = core.replace_node(
        "n1",
        as_node(
            {
                **make_node("n1", {"a": "1"}),
                "metadata": {
                    "name": "n1",
                    "labels": {"a": "1"},
                    "resourceVersion": version(node),
                },
            }
        ),
    )
    assert meta(fresh).labels == {"a": "1"}
    stale = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "resourceVersion": version(node)},
    }
    with pytest.raises(ApiException) as err:
        core.replace_node("n1", as_node(stale))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"


def test_patch_types(core: client.CoreV1Api, kube_server: FakeApiServer) -> None:
    core.create_node(as_node(make_node("n1", {"keep": "1", "drop": "1"})))
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
    pod = core.create_namespaced_pod(NS, as_pod(make_pod("a")))
    rv = version(pod)
    core.patch_namespaced_pod(
        "a", NS, {"metadata": {"resourceVersion": rv, "annotations": {"x": "1"}}}
    )
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod(
            "a", NS, {"metadata": {"resourceVersion": rv, "annotations": {"x": "2"}}}
        )
    assert err.value.status == 409
    assert meta(core.read_namespaced_pod("a", NS)).annotations == {"x": "1"}


def test_noop_patch_keeps_resource_version(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod(NS, as_pod(make_pod("a", {"x": "1"})))
    again = core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"x": "1"}}})
    assert version(again) == version(pod)


def test_status_subresource_is_separate(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, as_pod(make_pod("a")))
    core.patch_namespaced_pod("a", NS, {"status": {"phase": "Running"}})  # ignored on main
    assert pod_status(core.read_namespaced_pod("a", NS)).phase == "Pending"
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
    assert pod_status(pod).phase == "Running"
    assert pod_spec(pod).scheduler_name != "ignored"
    # A pod status write keeps label and annotation changes, as the real API server does (so
    # whoever may write pods/status can change a pod's annotations).
    assert meta(pod).labels == {"kept": "1"}


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
    assert isinstance(got, dict)  # custom objects come back as decoded JSON
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
    lease: dict[str, Any] = {
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
    core.create_namespaced_pod(NS, as_pod(pod))
    resp = raw(
        core.create_namespaced_pod_binding(
            "a", NS, as_binding(binding("a", "n1", {"vgpu/assign": "gpu0"})), _preload_content=False
        )
    )
    assert resp.status == 201
    assert json.loads(resp.data)["status"] == "Success"
    got = core.read_namespaced_pod("a", NS)
    assert pod_spec(got).node_name == "n1"
    assert meta(got).annotations == {"existing": "1", "vgpu/assign": "gpu0"}
    conditions = pod_status(got).conditions or []
    assert [(c.type, c.status) for c in conditions] == [("PodScheduled", "True")]


def test_second_binding_is_409_and_changes_nothing(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, as_pod(make_pod("a")))
    core.create_namespaced_pod_binding(
        "a", NS, as_binding(binding("a", "n1")), _preload_content=False
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding(
            "a", NS, as_binding(binding("a", "n2", {"x": "1"})), _preload_content=False
        )
    assert err.value.status == 409
    got = core.read_namespaced_pod("a", NS)
    assert pod_spec(got).node_name == "n1" and not meta(got).annotations


# ----- watch ------------------------------------------------------------------------------------
def test_watch_replays_changes_after_resource_version(core: client.CoreV1Api) -> None:
    start = version(core.list_namespaced_pod(NS))
    core.create_namespaced_pod(NS, as_pod(make_pod("a", {"app": "x"})))
    core.patch_namespaced_pod("a", NS, {"metadata": {"annotations": {"k": "v"}}})
    core.create_namespaced_pod(NS, as_pod(make_pod("b", {"app": "y"})))  # filtered out
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"app": "z"}}})  # leaves selector
    got = events(
        core.list_namespaced_pod,
        NS,
        limit=3,
        resource_version=start,
        label_selector="app=x",
        timeout_seconds=5,
    )
    assert [(e["type"], name(e["object"])) for e in got] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]


def test_watch_streams_live_events(core: client.CoreV1Api) -> None:
    start = version(core.list_node())

    def writer() -> None:
        time.sleep(0.1)
        core.create_node(as_node(make_node("n1")))
        core.delete_node("n1")

    thread = threading.Thread(target=writer)
    thread.start()
    got = events(core.list_node, limit=2, resource_version=start, timeout_seconds=5)
    thread.join()
    assert [e["type"] for e in got] == ["ADDED", "DELETED"]


def test_watch_without_resource_version_starts_with_current_objects(
    core: client.CoreV1Api,
) -> None:
    core.create_node(as_node(make_node("n1")))
    (first,) = events(core.list_node, limit=1, timeout_seconds=5)
    assert (first["type"], name(first["object"])) == ("ADDED", "n1")


def test_watch_from_compacted_version_is_410(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    old = version(core.list_node())
    core.create_node(as_node(make_node("n1")))
    kube_server.store.compact()
    with pytest.raises(ApiException) as err:  # ERROR event carrying a 410 Status
        events(core.list_node, resource_version=old, timeout_seconds=2)
    assert err.value.status == 410
    kube_server.watch_expired = "http"
    with pytest.raises(ApiException) as err:
        core.list_node(watch=True, resource_version=old, _preload_content=False)
    assert err.value.status == 410


def test_watch_sends_bookmarks_on_request(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    kube_server.bookmark_interval = 0.05
    rv = version(core.list_node())
    resp = raw(
        core.list_node(
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=1,
            _preload_content=False,
        )
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
    resp = raw(
        core.list_node(
            watch=True,
            resource_version=version(core.list_node()),
            _preload_content=False,
        )
    )
    assert resp.read() == b""
    assert time.monotonic() - began < 5


# ----- fault injection and direct store access ----------------------------------------------------
def test_injected_status_applies_the_given_number_of_times(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    fault = kube_server.inject("POST", r"/namespaces/default/pods$", status=500, times=1)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(NS, as_pod(make_pod("a")))
    assert err.value.status == 500
    assert status_of(err.value)["reason"] == "InternalError"
    core.create_namespaced_pod(NS, as_pod(make_pod("a")))
    assert fault.hits == 1


def test_injected_conflict_on_bind(core: client.CoreV1Api, kube_server: FakeApiServer) -> None:
    core.create_namespaced_pod(NS, as_pod(make_pod("a")))
    kube_server.inject("POST", r"/binding$", status=409, reason="Conflict")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding(
            "a", NS, as_binding(binding("a", "n1")), _preload_content=False
        )
    assert err.value.status == 409
    assert not pod_spec(core.read_namespaced_pod("a", NS)).node_name


def test_injected_delay_makes_the_client_time_out(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    kube_server.inject("POST", r"/pods$", delay=0.5)
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.create_namespaced_pod(NS, as_pod(make_pod("a")), _request_timeout=0.1)


def test_dropped_connection(core: client.CoreV1Api, kube_server: FakeApiServer) -> None:
    kube_server.inject("POST", r"/pods$", drop=True)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_namespaced_pod(NS, as_pod(make_pod("a")))


def test_direct_store_access_is_visible_to_clients_and_watches(
    core: client.CoreV1Api, kube_server: FakeApiServer
) -> None:
    start = kube_server.store.resource_version
    kube_server.store.put(make_node("n1", {"a": "1"}))
    assert meta(core.read_node("n1")).labels == {"a": "1"}
    core.patch_node("n1", {"metadata": {"labels": {"b": "2"}}})
    stored = kube_server.store.get("Node", None, "n1")
    assert stored is not None and stored["metadata"]["labels"] == {"a": "1", "b": "2"}
    got = events(core.list_node, limit=2, resource_version=start, timeout_seconds=5)
    assert [e["type"] for e in got] == ["ADDED", "MODIFIED"]


def test_requests_are_recorded(core: client.CoreV1Api, kube_server: FakeApiServer) -> None:
    core.create_node(as_node(make_node("n1")))
    core.list_node(label_selector="a=b")
    create, listing = kube_server.requests
    assert (create.method, create.path, create.body["metadata"]["name"]) == (
        "POST",
        "/api/v1/nodes",
        "n1",
    )
    assert (listing.method, listing.query) == ("GET", {"labelSelector": "a=b"})


def test_watch_ends_at_timeout_seconds(core: client.CoreV1Api) -> None:
    rv = version(core.list_node())
    began = time.monotonic()
    resp = raw(
        core.list_node(watch=True, resource_version=rv, timeout_seconds=1, _preload_content=False)
    )
    assert resp.read() == b""
    assert 0.9 <= time.monotonic() - began < 5


def test_node_status_subresource(core: client.CoreV1Api) -> None:
    core.create_node(as_node(make_node("n1")))
    capacity = {"vgpu.io/core": "400", "vgpu.io/memory": "320"}
    core.patch_node_status("n1", {"status": {"capacity": capacity, "allocatable": capacity}})
    core.patch_node("n1", {"status": {"capacity": {"vgpu.io/core": None}}})  # ignored on main
    node = core.read_node("n1")
    assert node_status(node).capacity == capacity and node_status(node).allocatable == capacity
