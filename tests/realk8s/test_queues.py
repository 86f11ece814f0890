"""vgpu's queues on the real API server, kube-scheduler and kubelets.

Queues are bound to namespaces (qa: the test namespace, qb: namespace qb). The chart's
MutatingAdmissionPolicy gates the vGPU pods of a bound namespace and labels them with its queue;
a tenant can neither remove the gate nor name another queue; the leader releases held pods fairly
(weights 1:3), gangs whole, reclaims through the Eviction API (PodDisruptionBudgets hold), and a
killed leader's successor releases nothing twice.
Pods "finish" when the test deletes them. Waits are generous: CI machines are small and loaded.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.test_chart import _helm_or_skip
from tests.realk8s import pods, queues
from tests.realk8s.cluster import RealCluster
from tests.realk8s.grants import granted
from tests.realk8s.processes import free_port, wait_until
from tests.realk8s.proxy import ServiceProxy
from tests.realk8s.rest import ApiError, Rest
from tests.realk8s.test_admission import TENANT_RULES, _user
from tests.realk8s.test_workloads import gang
from vgpu.api.queues.config import QUEUE_GATE, QUEUE_LABEL

pytestmark = pytest.mark.realk8s

CLUSTER_CORES = 800  # two nodes of four fake GPUs
QUEUES = [
    {"name": "qa", "weight": 1, "namespaces": [queues.NAMESPACES["qa"]]},
    {"name": "qb", "weight": 3, "namespaces": [queues.NAMESPACES["qb"]]},
]


@pytest.fixture(scope="module")
def queued(real_cluster: RealCluster) -> Iterator[RealCluster]:
    """The chart's queue objects installed and extender-0 releasing; afterwards, as before."""
    _helm_or_skip()
    objs = queues.install(real_cluster)
    real_cluster.start_extender("extender-0", None, *queues.queue_flags())
    yield real_cluster
    queues.delete_all(real_cluster.admin)
    queues.uninstall(real_cluster, objs)
    real_cluster.start_extender("extender-0")


@pytest.fixture
def two_queue_replicas(queued: RealCluster) -> Iterator[RealCluster]:
    """extender-0 (leading) and extender-1 (following), both with queues, kube-scheduler
    calling the lease holder through a proxy (as tests/realk8s/test_failover.py)."""
    cluster = queued
    queues.delete_all(cluster.admin)
    queues.configure(cluster.admin, QUEUES)
    ports = {"extender-0": cluster.ports["extender"], "extender-1": free_port()}
    cluster.start_extender("extender-1", ports["extender-1"], *queues.queue_flags())
    log1 = cluster.procs.log("extender-1")
    wait_until(
        lambda: "pod watch synced" in log1.read_text(errors="replace"),
        60,
        "extender-1 to follow, synced",
        (log1, lambda: cluster.procs.alive("extender-1")),
    )

    def ready() -> int | None:
        leader = cluster.extender_leader()
        return ports.get(leader) if leader else None

    proxy = ServiceProxy(free_port(), ready).start()
    cluster.start_scheduler(extender_port=proxy.port)
    yield cluster
    queues.delete_all(cluster.admin)
    cluster.procs.stop("extender-1")
    proxy.stop()
    if not cluster.procs.alive("extender-0"):
        cluster.start_extender("extender-0", None, *queues.queue_flags())
    cluster.start_scheduler()


def _released(log: Path, names: list[str]) -> list[str]:
    return [key for _, key in queues.released_lines(log) if key.split("/", 1)[1] in names]


@pytest.fixture
def api(queued: RealCluster) -> Iterator[Rest]:
    admin = queued.admin
    queues.delete_all(admin)
    queues.configure(admin, QUEUES)
    yield admin
    queues.delete_all(admin)
    queues.unprotect_all(admin)


KUEUE_GATE = "kueue.x-k8s.io/admission"


def test_vgpu_pods_of_a_bound_namespace_are_gated_in_its_queue(api: Rest) -> None:
    created = {
        "plain": api.post(pods.PODS, pods.pod("plain", pods.container("main", 10))),
        "queued": api.post(pods.PODS, queues.qpod("queued", "qa", 10)),
        "no-gpu": api.post(
            pods.PODS, pods.pod("no-gpu", pods.container("main"), labels={QUEUE_LABEL: "qa"})
        ),
        "made-up-kueue-mark": api.post(
            pods.PODS, queues.qpod("made-up", "qa", 10, **{"kueue.x-k8s.io/anything": "x"})
        ),
    }
    other = queues.qpod("other-gate", "qa", 10)
    other["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    created["other-gate"] = api.post(pods.PODS, other)
    kueue = queues.qpod("kueue", "qa", 10, **{"kueue.x-k8s.io/queue-name": "k"})
    with pytest.raises(ApiError) as err:  # no Kueue runs here: nothing would hold it
        api.post(pods.PODS, kueue)
    assert err.value.status == 403 and "Kueue does not hold it" in err.value.message
    kueue["spec"]["schedulingGates"] = [{"name": KUEUE_GATE}]  # as Kueue's webhook adds it
    created["kueue"] = api.post(pods.PODS, kueue)
    assert {n: queues.gates(p) for n, p in created.items()} == {
        "plain": [QUEUE_GATE],  # labelled from its namespace
        "queued": [QUEUE_GATE],
        "no-gpu": [],
        "made-up-kueue-mark": [QUEUE_GATE],  # no one else's hold
        "other-gate": ["example.com/other", QUEUE_GATE],
        "kueue": [KUEUE_GATE],
    }
    with pytest.raises(ApiError) as err:  # only Kueue's controller may admit it
        api.request(
            "PATCH",
            f"{pods.PODS}/kueue",
            [{"op": "remove", "path": "/spec/schedulingGates"}],
            "application/json-patch+json",
        )
    assert err.value.status == 403 and "only Kueue" in err.value.message
    assert created["plain"]["metadata"]["labels"][QUEUE_LABEL] == "qa"
    pods.wait_running(api, "queued", timeout=60)  # the extender released it
    pods.wait_running(api, "plain", timeout=60)


def test_a_tenant_can_neither_remove_the_gate_nor_name_another_queue(
    queued: RealCluster, api: Rest
) -> None:
    """The queue label was free; now the namespace names the queue, on every pod."""
    tenant = _user(queued, "queue-tenant", TENANT_RULES)
    queues.configure(api, [{**QUEUES[0], "cap": {"cores": 0}}, QUEUES[1]])  # qa holds its pods
    asked = tenant.post(
        pods.PODS, pods.pod("held", pods.container("main", 10), labels={QUEUE_LABEL: "qb"})
    )
    assert asked["metadata"]["labels"][QUEUE_LABEL] == "qa"  # the namespace's queue, not qb
    assert queues.gates(asked) == [QUEUE_GATE]
    ghost = pods.pod("ghost", pods.container("main", 10), labels={QUEUE_LABEL: "qb"})
    ghost["spec"]["schedulerName"] = "nobody"  # not gated: its label is refused instead
    with pytest.raises(ApiError) as err:
        tenant.post(pods.PODS, ghost)
    assert err.value.status == 403 and "must be qa" in err.value.message
    path = f"{pods.PODS}/held"
    for who in (tenant, api):  # a namespace's pod editor, and even a cluster admin
        with pytest.raises(ApiError) as err:
            who.request(
                "PATCH",
                path,
                [{"op": "remove", "path": "/spec/schedulingGates"}],
                "application/json-patch+json",
            )
        assert err.value.status == 403 and "only the vgpu extender" in err.value.message
        with pytest.raises(ApiError) as err:
            who.merge_patch(path, {"metadata": {"labels": {QUEUE_LABEL: "qb"}}})
        assert err.value.status == 403 and "must be qa" in err.value.message
        with pytest.raises(ApiError) as err:  # nor leave the queue
            who.merge_patch(path, {"metadata": {"labels": {QUEUE_LABEL: None}}})
        assert err.value.status == 403 and "must be qa" in err.value.message
    assert queues.gates(pods.get(api, "held")) == [QUEUE_GATE]
    tenant.close()


def test_a_tenant_cannot_leave_its_queue_through_kueues_marks(
    queued: RealCluster, api: Rest
) -> None:
    """Any `kueue.x-k8s.io/` mark once took a vGPU pod out of its queue: made by a namespace's
    pod editor, Kueue's queue-name label without Kueue's gate is refused, a made-up Kueue label
    is gated by vgpu, and Kueue's own gate stays until Kueue's controller removes it."""
    tenant = _user(queued, "kueue-tenant", TENANT_RULES)
    kueue = queues.qpod("kueue-t", "qa", 10, **{"kueue.x-k8s.io/queue-name": "k"})
    with pytest.raises(ApiError) as err:
        tenant.post(pods.PODS, kueue)
    assert err.value.status == 403 and "Kueue does not hold it" in err.value.message
    kueue["spec"]["schedulingGates"] = [{"name": KUEUE_GATE}]
    held = tenant.post(pods.PODS, kueue)
    assert queues.gates(held) == [KUEUE_GATE]
    for patch in (
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        [{"op": "replace", "path": "/spec/schedulingGates", "value": []}],
    ):
        with pytest.raises(ApiError) as err:
            tenant.request("PATCH", f"{pods.PODS}/kueue-t", patch, "application/json-patch+json")
        assert err.value.status == 403 and "only Kueue" in err.value.message
    made_up = queues.qpod("made-up-t", "qa", 10, **{"kueue.x-k8s.io/pod-group-total": "1"})
    assert queues.gates(tenant.post(pods.PODS, made_up)) == [QUEUE_GATE]
    assert queues.gates(pods.get(api, "kueue-t")) == [KUEUE_GATE]
    tenant.close()


def test_a_gang_of_three_is_released_in_one_pass_and_bound_whole(
    queued: RealCluster, api: Rest
) -> None:
    for i in range(6):  # six of the eight GPUs taken by pods outside any queue
        api.post(pods.PODS, pods.pod(f"filler-{i}", pods.container("main", 100)))
    for i in range(6):
        pods.wait_running(api, f"filler-{i}", timeout=90)
    members = gang("trio", 3, ps=False)
    for member in members:
        member["metadata"]["labels"][QUEUE_LABEL] = "qa"
        api.post(pods.PODS, member)
    names = [str(m["metadata"]["name"]) for m in members]
    wait_until(
        lambda: any(
            "does not fit whole" in e.get("message", "") for e in pods.events_for(api, names[0])
        ),
        60,
        "the held gang's Event",
    )
    assert all(queues.gates(pods.get(api, n)) == [QUEUE_GATE] for n in names), "none released"
    api.delete(f"{pods.PODS}/filler-0")
    for name in names:
        pods.wait_running(api, name, timeout=120)
    times = [t for t, key in queues.released_lines(queued.procs.log("extender-0")) if "trio" in key]
    assert len(times) == 3
    stamps = [time.mktime(time.strptime(t[:19], "%Y-%m-%d %H:%M:%S")) for t in times]
    assert max(stamps) - min(stamps) <= 1, f"released over more than one pass: {times}"
    gpus = {granted(pods.get(api, n))["tf"]["GPUS"] for n in names}
    assert len(gpus) == 3, "each member has a whole GPU of its own"


def test_weights_1_to_3_give_b_three_quarters_of_bound_cores(api: Rest) -> None:
    """A fills the cluster first; B arrives; both keep a backlog the size of the cluster; pods
    run 15-40 s each. Samples are taken when the cluster is settled (full, nothing released and
    unbound, nothing terminating)."""
    rng = random.Random(22)
    runs: dict[str, float] = {}
    serial = {"qa": 0, "qb": 0}

    def submit(queue: str, count: int) -> None:
        for _ in range(count):
            name = f"{queue}-{serial[queue]:03d}"
            serial[queue] += 1
            queues.post(api, name, queue, 50)
            runs[name] = rng.uniform(15, 40)

    submit("qa", 32)
    wait_until(lambda: queues.holding(api).bound.get("qa") == CLUSTER_CORES, 120, "A to fill")
    b_start = time.monotonic()
    submit("qb", 32)
    seen: dict[str, float] = {}
    samples: list[tuple[float, float]] = []
    converged: float | None = None
    while time.monotonic() - b_start < 240:
        now = time.monotonic()
        held = queues.holding(api)
        for pod in held.items:
            name = pod["metadata"]["name"]
            if pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
                seen.setdefault(name, now)
                if now - seen[name] >= runs[name]:
                    api.delete(f"{queues.path(name[:2])}/{name}")
                    submit(name[:2], 1)  # the backlog stays twice the cluster
        settled = held.released == 0 and held.deleting == 0
        if settled and sum(held.bound.values()) == CLUSTER_CORES:
            samples.append((now - b_start, held.share("qb")))
            if 0.70 <= samples[-1][1] <= 0.80:
                converged = samples[-1][0] if converged is None else converged
            else:
                converged = None
        if converged is not None and samples[-1][0] - converged >= 60:
            break
        time.sleep(2)
    print(f"B's share of bound cores (s after B arrived, share): {samples}")
    assert converged is not None and converged <= 180, samples
    assert samples[-1][0] - converged >= 60, "B held 70-80 % for a minute"


def test_reclaim_brings_b_to_its_share_within_a_minute_and_a_budget_holds(
    queued: RealCluster, api: Rest
) -> None:
    """A fills the cluster; its two youngest pods are under a budget that allows no disruption
    (the first victims reclaim would pick); B (reclaim on) arrives and must still get its 600."""
    reclaiming = [QUEUES[0], {**QUEUES[1], "reclaim": True}]
    queues.configure(api, reclaiming, minRuntimeSeconds=5)
    for i in range(20):
        protected = {"protected": "yes"} if i in (14, 15) else {}
        api.post(pods.PODS, queues.qpod(f"a-{i:02d}", "qa", 50, **protected))
        time.sleep(0.2)  # distinct start times: "youngest" is well defined
    wait_until(lambda: queues.holding(api).bound.get("qa") == CLUSTER_CORES, 120, "A to fill")
    queues.protect(api, "protected", {"protected": "yes"})
    time.sleep(6)  # past the minimum runtime
    started = time.monotonic()
    for i in range(16):
        queues.post(api, f"b-{i:02d}", "qb", 50)
    wait_until(
        lambda: queues.holding(api).bound.get("qb", 0) >= 600, 60, "B to reach its 600 cores"
    )
    print(f"B reached its share {time.monotonic() - started:.1f}s after it arrived")
    for name in ("a-14", "a-15"):
        pod = pods.get(api, name)
        assert pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp")
    log = queued.procs.log("extender-0").read_text()
    assert "reclaim: evicted pod default/a-" in log


def test_killing_the_leader_mid_stream_releases_nothing_twice(
    two_queue_replicas: RealCluster,
) -> None:
    cluster = two_queue_replicas
    api = cluster.admin
    leader = cluster.extender_leader()
    assert leader == "extender-0"
    names = [f"{q}-{i:02d}" for i in range(12) for q in ("qa", "qb")]
    log0 = cluster.procs.log("extender-0")
    for n, name in enumerate(names):
        queues.post(api, name, name[:2], 50)
        if n == 8:
            wait_until(lambda: len(_released(log0, names)) >= 4, 60, "releases to start")
            cluster.procs.stop(leader, sig=signal.SIGKILL, grace=0)
        time.sleep(0.5)
    wait_until(lambda: cluster.extender_leader() == "extender-1", 60, "extender-1 to lead")
    full = lambda: sum(queues.holding(api).bound.values()) == CLUSTER_CORES  # noqa: E731
    wait_until(full, 120, "the cluster to fill")
    bound = [p["metadata"] for p in queues.holding(api).items if p["spec"].get("nodeName")]
    for meta in bound[:8]:  # make room: the rest are released by the new leader
        api.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
    wait_until(lambda: not queues.holding(api).gated, 120, "every pod released")
    wait_until(full, 120, "the cluster to fill again")
    released = _released(log0, names) + _released(cluster.procs.log("extender-1"), names)
    assert sorted(released) == sorted(set(released)), "a pod was released twice"
    per_gpu: dict[str, int] = {}
    for pod in queues.holding(api).items:
        if pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
            grant = granted(pod)["main"]
            per_gpu[grant["GPUS"]] = per_gpu.get(grant["GPUS"], 0) + int(grant["VGPU_CORES"])
            assert pod["status"].get("phase") != "Failed", pod["status"]
    assert max(per_gpu.values()) <= 100, per_gpu
