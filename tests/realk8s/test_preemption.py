"""Preemption of vGPU pods by the real kube-scheduler, through the extender's preempt verb.

The cluster has two nodes of 4 fake A100s (100 cores each). kube-scheduler's DefaultPreemption
sees `vgpu.io/cores` as one number per node; the extender sees GPUs.

- Whole GPUs taken by low-priority pods: the node total is short, kube-scheduler picks one
  victim per node, the preempt verb keeps the nodes where that victim's GPU then fits the pod,
  one pod is evicted and the high-priority pod runs in its place.
- Every GPU 60 cores full: the node totals have room (160 free), only the GPUs are short.
  kube-scheduler's own filters then fit the pod with nothing evicted. Up to 1.37 the dry run
  counts that as no candidate (`expected at least one victim pod`); from 1.38 it sends the node
  to the preempt verb with an empty victim list (kubernetes/kubernetes#135486), which the verb
  omits (the pod does not fit with nothing evicted, and it never picks victims itself). On both,
  nothing is evicted and the pod stays pending: vgpu does not defragment by preemption.
- The extender's view of the API server behind kube-scheduler's (`tests/realk8s/lag.py`):
  kube-scheduler requeues the preemptor when the victim's deletion reaches its informer, while
  the extender still counts the victim's GPU as held by the kubelet (`kubeletStale`, about a
  second after the deletion, and later still through the lag). Still exactly one victim: the
  filter answers with an error (backoff, no PostFilter) rather than refusing every node, which
  let kube-scheduler, no longer seeing a terminating victim, preempt a second in every run
  (`vgpu/extender/preemption_wait.py`).
- Two high-priority pods of one shape at once beside a node full of low-priority ones: the
  second is refused where it fits until the first is admitted (invariant I); it waits, with the
  same error, instead of evicting a pod on the full node (which it did in every run).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from tests.realk8s import configs, manifests, pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.lag import LaggingProxy
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Identity, Obj, Rest
from tests.realk8s.test_admission import _user
from tests.realk8s.test_scheduling_calls import _metrics, _settled_calls

pytestmark = pytest.mark.realk8s

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
LOW, HIGH = "vgpu-test-low", "vgpu-test-high"
LAG = 0.5
"""Seconds the extender's view of the API server runs behind in the lagging test."""
WAITS = re.compile(r"^vgpu_extender_preemption_waits_total (\S+)$", re.M)


@pytest.fixture
def api(real_cluster: RealCluster) -> Iterator[Rest]:
    rest = real_cluster.admin
    pods.delete_all(rest)
    for name, value in ((LOW, 10), (HIGH, 1000)):
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
        try:
            rest.post(CLASSES, {**body, "metadata": {"name": name}, "value": value})
        except ApiError as err:
            if err.status != 409:  # made by an earlier test of the session
                raise
    yield rest
    pods.delete_all(rest)


def _pod(name: str, cores: int, priority: str) -> Obj:
    pod = pods.pod(name, pods.container("main", cores, 0 if cores % 100 == 0 else 8))
    pod["spec"]["priorityClassName"] = priority
    return pod


def _fill(api: Rest, cores: int) -> list[str]:
    """One low-priority pod of `cores` on each of the 8 GPUs (two never share one)."""
    names = [f"low-{i}" for i in range(8)]
    for name in names:
        api.post(pods.PODS, _pod(name, cores, LOW))
    for name in names:
        try:
            pods.wait_running(api, name)
        except TimeoutError as err:
            err.add_note(str([e.get("message") for e in pods.events_for(api, name)]))
            raise
    return names


def _alive(api: Rest, names: list[str]) -> set[str]:
    """The pods of `names` that exist and are not being deleted."""
    items = api.get(pods.PODS).get("items", [])
    return {
        p["metadata"]["name"]
        for p in items
        if p["metadata"]["name"] in names and not p["metadata"].get("deletionTimestamp")
    }


def test_a_high_priority_pod_evicts_one_whole_gpu_pod_and_runs(
    real_cluster: RealCluster, api: Rest
) -> None:
    low = _fill(api, 100)
    before = _settled_calls(real_cluster).get("preempt", 0.0)
    api.post(pods.PODS, _pod("high", 100, HIGH))
    running = pods.wait_running(api, "high", timeout=120)
    assert len(_alive(api, low)) == 7, "exactly one victim"
    assert _settled_calls(real_cluster).get("preempt", 0.0) > before, "the verb judged it"
    assert running["spec"]["nodeName"] in {"node-a", "node-b"}


def test_a_pod_short_only_on_single_gpus_evicts_nothing(
    real_cluster: RealCluster, api: Rest
) -> None:
    low = _fill(api, 60)
    before = _settled_calls(real_cluster).get("preempt", 0.0)
    api.post(pods.PODS, _pod("high", 80, HIGH))

    def failed() -> list[Obj] | None:
        events = [e for e in pods.events_for(api, "high") if e.get("reason") == "FailedScheduling"]
        return events or None

    wait_until(failed, 60, "the high-priority pod's FailedScheduling event")  # after PostFilter
    assert _alive(api, low) == set(low), "a pod was evicted for nothing"
    high = pods.get(api, "high")
    assert not high["spec"].get("nodeName") and not high["status"].get("nominatedNodeName")
    minor = int(str(api.get("/version")["minor"]).rstrip("+"))
    asked = _settled_calls(real_cluster).get("preempt", 0.0) > before
    assert asked == (minor >= 38), f"1.{minor}: empty victim lists reach the verb from 1.38 on"


@pytest.fixture
def lagging_watch(real_cluster: RealCluster) -> Iterator[LaggingProxy]:
    """extender-0 restarted to reach the API server through a `LaggingProxy`: every response
    and watch event reaches it `LAG` seconds after the API server sent it; afterwards the usual
    extender-0 again."""
    cluster = real_cluster
    proxy = LaggingProxy(cluster.ports["apiserver"], LAG).start()
    kubeconfig = configs.write_kubeconfig(
        cluster.kubeconfig("vgpu-extender-lagging"),
        f"https://127.0.0.1:{proxy.port}",
        cluster.pki / "ca.crt",
        Identity("vgpu-extender", token=cluster.tokens["vgpu-extender"]),
    )
    cluster.procs.stop("extender-0")
    try:
        cluster.start_extender("extender-0", None, *cluster.extender_flags(), kubeconfig=kubeconfig)
        yield proxy
    finally:
        cluster.procs.stop("extender-0")
        cluster.start_extender("extender-0", None, *cluster.extender_flags())
        proxy.stop()


def test_an_extender_watch_behind_kube_schedulers_still_costs_one_victim(
    real_cluster: RealCluster, api: Rest, lagging_watch: LaggingProxy
) -> None:
    low = _fill(api, 100)
    api.post(pods.PODS, _pod("high", 100, HIGH))
    running = pods.wait_running(api, "high", timeout=120)
    assert len(_alive(api, low)) == 7, "exactly one victim"
    found = WAITS.search(_metrics(real_cluster))
    assert found and float(found.group(1)) >= 1, "the race was met: a filter waited for the victim"
    assert running["spec"]["nodeName"] in {"node-a", "node-b"}


def _on(pod: Obj, node: str) -> Obj:
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


def test_a_pod_that_fits_once_a_neighbour_is_admitted_evicts_nobody(
    real_cluster: RealCluster, api: Rest
) -> None:
    """node-b full of low-priority pods, node-a with two idle GPUs; two high-priority pods of one
    shape at once: the second is refused on node-a only until the first is admitted there
    (invariant I: the kubelet could confuse them). It waits for that; it must not evict a pod on
    node-b, which kube-scheduler's PostFilter would do for a refusal of every node."""
    low = [f"low-{i}" for i in range(6)]
    for i, name in enumerate(low):
        api.post(pods.PODS, _on(_pod(name, 100, LOW), "node-b" if i < 4 else "node-a"))
    for name in low:
        pods.wait_running(api, name)
    high = ["high-1", "high-2"]
    for name in high:
        api.post(pods.PODS, _pod(name, 100, HIGH))
    nodes = {pods.wait_running(api, name, timeout=120)["spec"]["nodeName"] for name in high}
    assert _alive(api, low) == set(low), "a pod was evicted for a pod that fitted a moment later"
    assert nodes == {"node-a"}


OTHER = "preemption-other-team"
TENANT_RULES: list[Obj] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]}
]


@pytest.fixture
def other_team(real_cluster: RealCluster, api: Rest) -> Iterator[str]:
    """A namespace of another team, with the ServiceAccount its pods run as (kept: with no
    namespace controller in the test cluster a deleted namespace would stay terminating)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHER}}
    manifests.create(api, namespace)
    account = {"name": "default", "namespace": OTHER}
    manifests.create(api, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account})
    yield f"/api/v1/namespaces/{OTHER}/pods"
    pods.delete_all(api, OTHER)


def test_a_tenants_burst_evicts_no_pod_of_another_team(
    real_cluster: RealCluster, api: Rest, other_team: str
) -> None:
    """From the tenant's side: a ServiceAccount that may only create pods in its namespace
    starts two high-priority pods of one shape at once, beside another team's low-priority pods
    (node-b full, two of node-a's GPUs). The second fits node-a once the first is admitted; no
    pod of the other team is evicted for it."""
    low = [f"low-{i}" for i in range(6)]
    for i, name in enumerate(low):
        pod = _on(_pod(name, 100, LOW), "node-b" if i < 4 else "node-a")
        api.post(other_team, {**pod, "metadata": {**pod["metadata"], "namespace": OTHER}})

    def theirs() -> set[str]:
        items = api.get(other_team).get("items", [])
        return {
            p["metadata"]["name"]
            for p in items
            if p.get("status", {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        }

    wait_until(lambda: theirs() == set(low), 120, "the other team's pods to run")
    tenant = _user(real_cluster, "preemptor", TENANT_RULES)
    try:
        for name in ("high-1", "high-2"):
            tenant.post(pods.PODS, _pod(name, 100, HIGH))
        nodes = {
            pods.wait_running(tenant, n, timeout=120)["spec"]["nodeName"]
            for n in ("high-1", "high-2")
        }
    finally:
        tenant.close()
    assert theirs() == set(low), (
        "another team's pod was evicted for a pod that fitted a moment later"
    )
    assert nodes == {"node-a"}


def test_a_gang_member_waiting_for_its_members_evicts_nobody(
    real_cluster: RealCluster, api: Rest
) -> None:
    """Found by a tenant-side review: a high-priority pod naming a gang of 100 of which it is
    the only member can never be placed, yet the preempt verb passed kube-scheduler's candidates
    through for it, and kube-scheduler evicted another team's pod for it, node after node. Now
    the verb offers no node while the gang has fewer members than its size."""
    low = _fill(api, 100)
    before = _settled_calls(real_cluster).get("preempt", 0.0)
    lone = _pod("lone", 100, HIGH)
    lone["metadata"]["annotations"] = {"vgpu.io/gang-name": "big", "vgpu.io/gang-size": "100"}
    api.post(pods.PODS, lone)
    asked = lambda: _settled_calls(real_cluster).get("preempt", 0.0) > before  # noqa: E731
    wait_until(asked, 60, "kube-scheduler to ask the preempt verb")
    time.sleep(5)  # an eviction would follow the verb's answer at once
    assert _alive(api, low) == set(low), "a pod was evicted for a gang that cannot be placed"
    assert not pods.get(api, "lone")["spec"].get("nodeName")
