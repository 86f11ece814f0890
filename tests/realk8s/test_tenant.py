"""A hostile tenant on the real cluster: every step made by a ServiceAccount that may only edit
pods (and their ephemeral containers) in its own namespace, against the shipped admission
policies, the real kube-apiserver, kube-scheduler and kubelets.

What must hold from its side: no container of a vGPU pod (app, init, sidecar or an ephemeral one
added later) may set `NVIDIA_VISIBLE_DEVICES` or any other `NVIDIA_*` variable the NVIDIA
runtime reads (`all` once gave a pod every GPU of its node); a pod of more than 64 vGPU
containers is refused at creation, with the fix; a vGPU init container is admitted, handed its
own grant and stays in `vgpu.io/admitted` past the agent's grace period; the extender's
leader Lease, whose annotations carry the strict holds and gang decisions, is out of its reach;
and past its namespace's bound of container directories its next container is refused while
another namespace's pods are still admitted on that node.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.realk8s import manifests, pods
from tests.realk8s.binary import build_interposer
from tests.realk8s.cluster import SYSTEM, RealCluster
from tests.realk8s.grants import given, granted
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Obj, Rest
from tests.realk8s.test_admission import _user
from vgpu.api.admitted import read_admitted
from vgpu.api.assignment import ADMITTED
from vgpu.api.podasks import MAX_VGPU_CONTAINERS

pytestmark = pytest.mark.realk8s

ROOT = Path(__file__).resolve().parents[2]
POLICIES = (
    ROOT / "daemonset" / "enforcement-policy.yaml",
    ROOT / "daemonset" / "container-cap-policy.yaml",
)
POD_EDITOR: list[Obj] = [
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["update", "patch"]},
]
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM}/leases/vgpu-extender"
BOUNDED = "node-b"
OTHER = "other-team"
OTHER_TEAM: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHER}}


def _refused(rest: Rest, path: str, body: Obj, *, put: bool = False) -> str:
    """The refusal's message ('' when the API server accepted the request)."""
    try:
        created = (rest.put if put else rest.post)(path, body)
    except ApiError as err:
        assert err.status in (403, 422), err
        return err.message
    if not put:  # a pod let in goes again, so the next attempt starts clean
        rest.delete(f"{path}/{created['metadata']['name']}")
        wait_until(lambda: _gone(rest, path, created), 30, "the accepted pod to go")
    return ""


def _gone(rest: Rest, path: str, created: Obj) -> bool:
    try:
        rest.get(f"{path}/{created['metadata']['name']}")
    except ApiError as err:
        return err.status == 404
    return False


def _unscheduled(name: str, *containers: Obj, init: list[Obj] | None = None) -> Obj:
    """A vGPU pod no scheduler serves: admission is what is tried, not placement."""
    obj = pods.pod(name, *containers, init=init)
    obj["spec"]["schedulerName"] = "nobody"
    return obj


@pytest.fixture(scope="module")
def tenant(real_cluster: RealCluster) -> Iterator[Rest]:
    """The shipped enforcement and container-cap policies in force, and the pod editor."""
    admin = real_cluster.admin
    applied = [obj for path in POLICIES for obj in manifests.apply_file(admin, path)]
    probe = _unscheduled("probe", {**pods.container("main", 10), "env": [_env("LD_PRELOAD")]})
    wide = [pods.container(f"i{n}", 10) for n in range(MAX_VGPU_CONTAINERS)]
    capped = _unscheduled("probe", pods.container("main", 10), init=wide)
    # each policy is loaded by the API server on its own: wait until both refuse
    for one in (probe, capped):
        wait_until(lambda: bool(_refused(admin, pods.PODS, one)), 60, "the policies in force")  # noqa: B023
    pods.delete_all(admin)
    rest = _user(real_cluster, "pod-editor", POD_EDITOR)
    try:
        yield rest
    finally:
        rest.close()
        pods.delete_all(admin)
        for obj in reversed(applied):
            admin.delete(manifests.object_path(obj))


@pytest.fixture(autouse=True)
def _clean(real_cluster: RealCluster) -> Iterator[None]:
    yield
    pods.delete_all(real_cluster.admin)


def _env(name: str, value: str = "all") -> Obj:
    return {"name": name, "value": value}


@pytest.mark.parametrize("name", ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"])
@pytest.mark.parametrize("where", ["app", "init", "sidecar"])
def test_a_tenant_cannot_set_nvidia_runtime_variables_in_any_container(
    tenant: Rest, name: str, where: str
) -> None:
    gpu = pods.container("main", 10)
    other = {**pods.container("helper"), "env": [_env(name)]}  # asks no vGPU itself
    if where == "app":
        pod = _unscheduled("nv", gpu, other)
    elif where == "init":
        pod = _unscheduled("nv", gpu, init=[other])
    else:
        pod = _unscheduled("nv", gpu, init=[{**other, "restartPolicy": "Always"}])
    message = _refused(tenant, pods.PODS, pod)
    assert "vGPU pod" in message and name[:7] in message, message


def test_a_tenant_cannot_set_nvidia_visible_devices_through_a_field_reference(
    tenant: Rest,
) -> None:
    ref = {
        "name": "NVIDIA_VISIBLE_DEVICES",
        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
    }
    pod = _unscheduled("nv-ref", {**pods.container("main", 10), "env": [ref]})
    assert "vGPU pod" in _refused(tenant, pods.PODS, pod)


def test_a_tenant_cannot_add_an_ephemeral_container_that_sees_every_gpu(tenant: Rest) -> None:
    """`kubectl debug` adds an ephemeral container through pods/ephemeralcontainers, after the
    pod's creation; the policy checks that update too."""
    created = tenant.post(pods.PODS, _unscheduled("debugged", pods.container("main", 10)))
    debug = {
        "name": "debug",
        "image": "registry.local/vgpu-test:1",
        "env": [_env("NVIDIA_VISIBLE_DEVICES")],
    }
    created["spec"]["ephemeralContainers"] = [debug]
    path = f"{pods.PODS}/debugged/ephemeralcontainers"
    message = _refused(tenant, path, created, put=True)
    assert "vGPU pod" in message and "NVIDIA" in message, message
    quiet = {**debug, "env": [_env("TERM", "xterm")]}
    created["spec"]["ephemeralContainers"] = [quiet]
    assert _refused(tenant, path, created, put=True) == "", "a harmless debug container is let in"


def test_a_tenant_pod_of_more_than_64_vgpu_containers_is_refused_with_the_fix(
    tenant: Rest,
) -> None:
    inits = [pods.container(f"i{n}", 10) for n in range(MAX_VGPU_CONTAINERS)]
    over = _unscheduled("wide", pods.container("main", 10), init=inits)
    message = _refused(tenant, pods.PODS, over)
    assert f"{MAX_VGPU_CONTAINERS + 1} containers ask vgpu.io/ devices" in message, message
    assert f"pods of at most {MAX_VGPU_CONTAINERS} vGPU containers" in message, message
    at_cap = _unscheduled("wide", pods.container("main", 10), init=inits[1:])
    assert _refused(tenant, pods.PODS, at_cap) == "", "64 vGPU containers are allowed"
    plain = [pods.container(f"p{n}") for n in range(10)]  # containers asking no vGPU count not
    beside = _unscheduled("wider", pods.container("main", 10), *plain, init=inits[1:])
    assert _refused(tenant, pods.PODS, beside) == ""


def test_a_tenant_cannot_create_a_vgpu_pod_bound_to_a_node_past_the_scheduler(
    tenant: Rest,
) -> None:
    """Such a pod waited unassigned on the node, and the agent refused every Allocate of its
    asks there as ambiguous: other teams' pods failed."""
    bound = _unscheduled("bound", *(pods.container(f"c{k}", k) for k in (1, 2, 3)))
    bound["spec"]["nodeName"] = "node-a"
    message = _refused(tenant, pods.PODS, bound)
    assert "created one with spec.nodeName set (node-a)" in message, message
    plain = pods.pod("plain", pods.container("main"))  # asks no vGPU: none of our business
    plain["spec"]["nodeName"] = "node-a"
    assert _refused(tenant, pods.PODS, plain) == ""


def test_a_tenant_cannot_change_a_pods_cores_limit_after_creating_it(tenant: Rest) -> None:
    """The agent reads vgpu.io/cores-limit at admission; changed after placement it could make
    the pod look interchangeable with another team's waiting beside it."""
    limited = _unscheduled("limited", pods.container("main", 30))
    limited["metadata"]["annotations"] = {"vgpu.io/cores-limit": "50"}
    tenant.post(pods.PODS, limited)
    for value in ("100", None):
        with pytest.raises(ApiError) as err:
            patch = {"metadata": {"annotations": {"vgpu.io/cores-limit": value}}}
            tenant.merge_patch(f"{pods.PODS}/limited", patch)
        assert err.value.status == 403 and "tried to change it" in err.value.message


def test_the_extenders_lease_is_out_of_a_tenants_reach(
    real_cluster: RealCluster, tenant: Rest
) -> None:
    """The leader Lease carries the strict holds and the gang decisions in annotations; a pod
    editor can neither read nor write it."""
    wait_until(lambda: real_cluster.extender_leader() is not None, 60, "an extender leader")
    attempts: list[Callable[[], Obj]] = [
        lambda: tenant.get(LEASE),
        lambda: tenant.merge_patch(
            LEASE, {"metadata": {"annotations": {"vgpu.io/strict-holds": "[" * 10_000}}}
        ),
        lambda: tenant.delete(LEASE),
    ]
    for attempt in attempts:
        with pytest.raises(ApiError) as err:
            attempt()
        assert err.value.status == 403, err.value
    annotations = real_cluster.admin.get(LEASE)["metadata"].get("annotations") or {}
    assert "[" * 100 not in annotations.get("vgpu.io/strict-holds", "")


def test_a_tenants_vgpu_init_container_is_admitted_handed_off_and_kept(
    real_cluster: RealCluster, tenant: Rest
) -> None:
    """The init container gets its own grant and the app container its own (drawn by the
    kubelet from the init container's devices), and the init container stays admitted past the
    agent's grace period (30 s) although pod-resources List never reports it."""
    prep = pods.container("prep", 30, 8)
    prep["env"] = [_env("FAKE_CRI_EXIT_CODE", "0")]  # the init container completes
    tenant.post(pods.PODS, pods.pod("t-init", pods.container("main", 20, 4), init=[prep]))
    bound = pods.wait_running(tenant, "t-init", timeout=90)
    want = granted(bound)
    assert set(want) == {"prep", "main"}, want
    assert given(real_cluster, "t-init", "prep") == want["prep"]
    assert given(real_cluster, "t-init", "main") == want["main"]

    def names() -> frozenset[str]:
        value = pods.get(tenant, "t-init")["metadata"].get("annotations", {}).get(ADMITTED)
        return read_admitted(value).names

    wait_until(lambda: names() == {"main", "prep"}, 60, "both containers admitted")
    end = time.monotonic() + 40  # past the grace period and a reconciliation
    while time.monotonic() < end:
        assert names() == {"main", "prep"}, names()
        time.sleep(1)


@pytest.fixture
def bounded_node(
    real_cluster: RealCluster, tenant: Rest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """node-b in mode vgpu-core with small container-directory bounds (2 per pod, 4 per
    namespace), so a tenant reaches them with a few pods; restored afterwards."""
    out = tmp_path_factory.mktemp("bounded")
    library = build_interposer(out / "lib")
    original = real_cluster.nodes[BOUNDED]
    flags = (
        "--mode=vgpu-core",
        f"--vgpu-core-library={library}",
        f"--state-dir={out / 'state'}",
        "--max-container-dirs-per-pod=2",
        "--max-container-dirs-per-namespace=4",
    )
    pods.delete_all(real_cluster.admin)
    real_cluster.restart_node(replace(original, agent_flags=original.agent_flags + flags))
    manifests.create(real_cluster.admin, OTHER_TEAM)
    account = {"name": "default", "namespace": OTHER}  # no controller manager makes it here
    manifests.create(
        real_cluster.admin, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account}
    )
    try:
        yield BOUNDED
    finally:
        pods.delete_all(real_cluster.admin, OTHER)
        real_cluster.admin.delete(manifests.object_path(OTHER_TEAM))
        pods.delete_all(real_cluster.admin)
        real_cluster.restart_node(original)


def _on(node: str, pod: Obj) -> Obj:
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


def _completes(container: Obj) -> Obj:
    return {**container, "env": [_env("FAKE_CRI_EXIT_CODE", "0")]}


def _failed(rest: Rest, name: str) -> str:
    """The pod's failure message, once the kubelet refused it."""
    with pytest.raises(pods.PodFailed) as err:
        pods.wait_running(rest, name, timeout=90)
    return err.value.message


def test_a_tenant_cannot_take_every_container_directory_of_a_node(
    real_cluster: RealCluster, tenant: Rest, bounded_node: str
) -> None:
    """Seven pods of one tenant once took all 2,048 directories of a node (the kubelet calls
    Allocate per init container) and every other vGPU container there was refused. Now a
    namespace and a pod have bounds of their own: past its namespace's the tenant's next
    container is refused, naming the bound, while another namespace's pods are still admitted
    on that node, up to their own pod's bound."""
    node = bounded_node
    init = _completes(pods.container("i0", 10))
    tenant.post(pods.PODS, _on(node, pods.pod("t1", pods.container("main", 20), init=[init])))
    for name, cores in (("t2", 30), ("t3", 5)):  # one directory each: four in the namespace
        tenant.post(pods.PODS, _on(node, pods.pod(name, pods.container("main", cores))))
    for name in ("t1", "t2", "t3"):
        pods.wait_running(tenant, name, timeout=90)
    tenant.post(pods.PODS, _on(node, pods.pod("t4", pods.container("main", 5))))
    assert "for namespace default (the bound is 4 per namespace)" in _failed(tenant, "t4")

    admin, theirs = real_cluster.admin, f"/api/v1/namespaces/{OTHER}/pods"
    admin.post(theirs, _in_other(_on(node, pods.pod("theirs", pods.container("main", 10)))))
    wait_until(lambda: _phase(admin, f"{theirs}/theirs") == "Running", 90, "their pod to run")
    inits = [_completes(pods.container(f"i{n}", 11 + n)) for n in range(3)]  # distinct limits
    wide = _in_other(_on(node, pods.pod("wide", pods.container("main", 10), init=inits)))
    admin.post(theirs, wide)
    wait_until(lambda: _phase(admin, f"{theirs}/wide") == "Failed", 90, "the wide pod refused")
    message = admin.get(f"{theirs}/wide")["status"].get("message", "")
    assert "the bound is 2 per pod" in message, message


def _in_other(pod: Obj) -> Obj:
    pod["metadata"]["namespace"] = OTHER
    return pod


def _phase(rest: Rest, path: str) -> str:
    return str(rest.get(path).get("status", {}).get("phase", ""))


@pytest.fixture
def short_gangs(real_cluster: RealCluster) -> Iterator[Path]:
    """extender-0 with a 15 s gang timeout (its log returned); as before afterwards."""
    real_cluster.start_extender("extender-0", None, "--gang-timeout=15")
    try:
        yield real_cluster.procs.log("extender-0")
    finally:
        pods.delete_all(real_cluster.admin)
        real_cluster.start_extender("extender-0")


def test_a_tenants_gang_gives_back_at_its_timeout_the_place_of_a_member_never_scheduled(
    real_cluster: RealCluster, tenant: Rest, short_gangs: Path
) -> None:
    """Found by a tenant-side review: a gang of one whose second member kube-scheduler never
    sends (here its own scheduling gate) kept that member's whole GPU reserved for good once the
    first bound; a reservation is no pod, so neither preemption nor any other team could have it.
    At the gang timeout the place past min-member goes back, and another pod takes that GPU."""
    for i in range(6):  # six of the eight GPUs
        tenant.post(pods.PODS, pods.pod(f"filler-{i}", pods.container("main", 100)))
    for i in range(6):
        pods.wait_running(tenant, f"filler-{i}", timeout=90)
    labels = {pods.GROUP_NAME: "one", pods.GROUP_MIN: "1"}
    never = pods.pod("one-never", pods.container("main", 100), labels=labels)
    never["spec"]["schedulingGates"] = [{"name": "example.com/never"}]
    tenant.post(pods.PODS, never)
    tenant.post(pods.PODS, pods.pod("one-0", pods.container("main", 100), labels=labels))
    pods.wait_running(tenant, "one-0", timeout=90)
    real_cluster.admin.post(pods.PODS, pods.pod("rival", pods.container("main", 100)))
    released = "default/one-never is past min-member: reservation released"
    wait_until(lambda: released in short_gangs.read_text(errors="replace"), 60, released)
    # an assigned pod's label change is a cluster event kube-scheduler requeues the rival on
    tenant.merge_patch(f"{pods.PODS}/filler-0", {"metadata": {"labels": {"poke": "1"}}})
    rival = pods.wait_running(real_cluster.admin, "rival", timeout=90)
    assert rival["spec"].get("nodeName"), "the released GPU went to the rival"
    assert not pods.get(tenant, "one-never")["spec"].get("nodeName")  # still gated


def test_a_tenants_pod_of_another_scheduler_reserves_no_gpu_through_a_gang(
    real_cluster: RealCluster, tenant: Rest
) -> None:
    """Found by a tenant-side review: a pod of another scheduler (never sent to the extender,
    counted by no queue) naming a gang beside one vgpu-scheduler member had its four GPUs
    reserved with the gang's plan, renewed at each plan, so another team's pods found no GPU.
    Now only pods of the schedulers the extender serves are gang members: the lone member
    waits for its gang, nothing is reserved, and the other pods take all eight GPUs."""
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"}
    decoy = pods.pod("decoy", pods.container("main", 400))
    decoy["spec"]["schedulerName"] = "nobody"
    decoy["metadata"]["annotations"] = dict(gang)
    tenant.post(pods.PODS, decoy)
    ours = pods.pod("ours", pods.container("main", 10))
    ours["metadata"]["annotations"] = dict(gang)
    tenant.post(pods.PODS, ours)
    admin = real_cluster.admin  # the pod editor may not read Events
    waiting = "gang default/g: waiting for members, 1 of 2 exist"
    wait_until(
        lambda: any(waiting in e.get("message", "") for e in pods.events_for(admin, "ours")),
        60,
        "the lone member's FailedScheduling event",
    )
    for i in range(8):
        admin.post(pods.PODS, pods.pod(f"theirs-{i}", pods.container("main", 100)))
    placed = [pods.wait_running(admin, f"theirs-{i}", timeout=90) for i in range(8)]
    assert all(p["spec"].get("nodeName") for p in placed), "all eight GPUs went to them"
    assert not pods.get(tenant, "ours")["spec"].get("nodeName")  # waits for its gang
