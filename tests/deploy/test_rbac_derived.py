"""RBAC exactly as used: each component's Roles grant the (group, resource, verb) triples its code
needs, and nothing else.

The triples are derived, not listed by hand: the code of each component (its entry module and
every vgpu module it imports, transitively) is read for calls to `KubeApi` methods, and each
method is run against the fake API server (tests/kubeapi), whose recorded requests are turned
into RBAC attributes the way the API server does (method + path + ?watch)."""

from __future__ import annotations

import ast
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deploy.test_manifests import by_name
from tests.kubeapi.server import FakeApiServer, RecordedRequest
from vgpu.adapters.kube.calls import KubeApi, KubeError

SRC = Path(__file__).resolve().parents[2] / "vgpu"
Triple = tuple[str, str, str]

COMPONENTS = {
    "extender": (
        "vgpu.daemons.extender.daemon",
        [("ClusterRole", "vgpu-extender"), ("Role", "vgpu-extender-leader-election")],
    ),
    "node-agent": ("vgpu.agent.agent", [("ClusterRole", "vgpu-node-agent")]),
    "inspect": ("vgpu.inspect.cli", [("ClusterRole", "vgpu-inspect")]),
}


def _module_file(name: str) -> Path | None:
    path = SRC.parent / Path(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imports(tree: ast.AST, name: str) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # relative: from the package of `name`
                base = ".".join([*name.split(".")[: -node.level], node.module])
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {f for f in found if f.startswith("vgpu.")}


def kube_methods_called(entry: str) -> set[str]:
    """Names of public `KubeApi` methods called anywhere in `entry`'s import closure."""
    api = {n for n in vars(KubeApi) if not n.startswith("_") and callable(getattr(KubeApi, n))}
    api -= {"from_environment", "close"}
    seen: set[str] = set()
    todo, called = [entry], set()
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None or name == "vgpu.adapters.kube.calls":
            continue
        seen.add(name)
        tree = ast.parse(path.read_text())
        todo += _imports(tree, name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in api:
                called.add(node.attr)
    return called


def attributes(request: RecordedRequest) -> Triple:
    """The RBAC (group, resource, verb) the API server checks for one request."""
    parts = urlsplit(request.path).path.strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource, name, sub = ([*rest, "", ""])[:3]
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        request.method, ""
    )
    if request.method == "GET":
        verb = "get" if name else ("watch" if request.query.get("watch") else "list")
    return group, f"{resource}/{sub}" if sub else resource, verb


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"containers": []},
}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
LEASE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}}
GROUP = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "g", "namespace": "ns"},
    "spec": {"minMember": 1},
}


def _watch(start: Callable[[threading.Event], Any], server: FakeApiServer) -> None:
    stop = threading.Event()
    events = start(stop)
    while next(events).type != "SYNCED":
        pass
    server.store.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    threading.Timer(0.3, stop.set).start()
    for _ in events:  # the watch request is made; the stream ends at `stop`
        break


CALLS: dict[str, Callable[[KubeApi, FakeApiServer], Any]] = {
    "get_node": lambda api, s: api.get_node("n"),
    "list_nodes": lambda api, s: api.list_nodes(),
    "list_namespaces": lambda api, s: api.list_namespaces(),
    "get_pod": lambda api, s: api.get_pod("ns", "p"),
    "list_pods": lambda api, s: api.list_pods(),
    "list_events": lambda api, s: api.list_events(field_selector="reason=InvalidPod"),
    "watch_nodes": lambda api, s: _watch(
        lambda stop: api.watch_nodes(stop=stop, timeout_seconds=1, retry_delay=0.05), s
    ),
    "watch_pods": lambda api, s: _watch(
        lambda stop: api.watch_pods(stop=stop, timeout_seconds=1, retry_delay=0.05), s
    ),
    "patch_node_metadata": lambda api, s: api.patch_node_metadata("n", labels={"a": "b"}),
    "patch_pod_annotations": lambda api, s: api.patch_pod_annotations("ns", "p", {"a": "b"}),
    "bind_pod": lambda api, s: api.bind_pod("ns", "p", "n", annotations={"a": "b"}),
    "create_event": lambda api, s: api.create_event(POD, reason="R", message="m"),
    "get_lease": lambda api, s: api.get_lease("ns", "l"),
    "create_lease": lambda api, s: api.create_lease("ns", {**LEASE, "metadata": {"name": "l2"}}),
    "replace_lease": lambda api, s: api.replace_lease("ns", "l", api.get_lease("ns", "l")),
    "get_pod_group": lambda api, s: api.get_pod_group("ns", "g"),
    "remove_scheduling_gate": lambda api, s: _refused(
        lambda: api.remove_scheduling_gate("ns", "p", ["vgpu.io/queue"], "vgpu.io/queue")
    ),
    "evict_pod": lambda api, s: api.evict_pod("ns", "p"),
    "get_config_map": lambda api, s: _refused(lambda: api.get_config_map("ns", "queues")),
}


def _refused(call: Callable[[], Any]) -> None:
    """A call whose request is what counts, whatever the fake server answers (a failed JSON
    patch test, a missing object)."""
    with contextlib.suppress(KubeError):
        call()


@pytest.fixture(scope="module")
def recorded() -> dict[str, set[Triple]]:
    """Each KubeApi method's RBAC attributes, from the requests it really sends."""
    out = {}
    with FakeApiServer() as server:
        for obj in (POD, NODE, {**LEASE, "metadata": {"name": "l", "namespace": "ns"}}, GROUP):
            server.store.put(obj)
        for method, call in CALLS.items():
            client = server.api_client()  # a fresh pool: a stopped watch leaves its connection
            server.clear_requests()
            call(KubeApi(client, request_timeout=5), server)
            out[method] = {attributes(r) for r in server.requests}
            client.close()
    return out


def test_every_kube_api_method_is_recorded() -> None:
    api = {n for n in vars(KubeApi) if not n.startswith("_") and callable(getattr(KubeApi, n))}
    assert api - {"from_environment", "close"} == set(CALLS)


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_each_role_grants_exactly_what_the_code_calls(
    component: str, recorded: dict[str, set[Triple]]
) -> None:
    entry, roles = COMPONENTS[component]
    needed = set().union(*(recorded[m] for m in kube_methods_called(entry)))
    granted = {
        (group, resource, verb)
        for kind, name in roles
        for rule in by_name(kind, name)["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == needed, f"missing {needed - granted}, unused {granted - needed}"


def test_the_admission_policy_sees_every_way_to_change_pod_annotations() -> None:
    """A Binding through pods/binding or the legacy bindings resource merges its annotations
    into the pod; pods/status updates keep metadata changes (upstream: the pod registry's
    binding and status strategies)."""
    policy = by_name("ValidatingAdmissionPolicy", "vgpu-protect-handoff-annotations")
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    covered = {(op, r) for rule in rules for op in rule["operations"] for r in rule["resources"]}
    for resource in ("pods", "pods/binding", "bindings", "pods/status"):
        assert ("CREATE", resource) in covered or resource == "pods/status", resource
        assert ("UPDATE", resource) in covered or "binding" in resource, resource
