"""On the real cluster, a value no JSON reader survives (an integer
of 4,301 digits, one past Python's int-digits limit) written where the cluster lets a node write
it. It must stop nothing but the object it sits on: binding goes on (also after a leadership
change), a running pod keeps its GPU, the report still reports, and the node agent repairs its
own annotation and goes on admitting pods."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import urllib3

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.grants import inspect_json
from tests.realk8s.processes import free_port, wait_until
from tests.realk8s.proxy import ServiceProxy
from tests.realk8s.rest import Identity, Obj, Rest
from vgpu.api.admitted import ADMITTED
from vgpu.api.inventory import InventoryError, parse_inventory

pytestmark = pytest.mark.realk8s

HUGE = "1" + "0" * 4300
"""4,301 digits: `json.loads` and `int()` raise a bare ValueError past 4,300 (CPython's limit)."""
INVENTORY = "vgpu.io/gpu-inventory"
WHOLE, SHARE = 100, 60


@pytest.fixture
def api(real_cluster: RealCluster) -> Iterator[Rest]:
    pods.delete_all(real_cluster.admin)
    yield real_cluster.admin
    pods.delete_all(real_cluster.admin)


def kubelet_of(cluster: RealCluster, node: str) -> Rest:
    """The node's kubelet identity (system:node:NODE, as `nodes/NODE/kubeconfig` names it):
    NodeRestriction lets it change its own Node's annotations."""
    cert, key = (str(cluster.pki / f"kubelet-{node}.{ext}") for ext in ("crt", "key"))
    return Rest(
        cluster.server, str(cluster.pki / "ca.crt"), Identity(f"system:node:{node}", cert, key)
    )


def agent_of(cluster: RealCluster, node: str) -> Rest:
    """The node agent's token bound to `node`: it may write `vgpu.io/admitted` on pods there."""
    text = cluster.agent_kubeconfig(node).read_text()
    token = re.search(r"token:\s*(\S+)", text)
    assert token is not None
    return Rest(cluster.server, str(cluster.pki / "ca.crt"), Identity("agent", token=token[1]))


def set_inventory(rest: Rest, node: str, value: str) -> None:
    rest.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {INVENTORY: value}}})


def inventory_of(cluster: RealCluster, node: str) -> str:
    return str(cluster.admin.get(f"/api/v1/nodes/{node}")["metadata"]["annotations"][INVENTORY])


def extender(cluster: RealCluster, port: int, path: str) -> tuple[int, str]:
    """GET `path` over HTTPS without a client certificate (probes and /metrics need none)."""
    pool = urllib3.PoolManager(
        ca_certs=str(cluster.pki / "ca.crt"), timeout=urllib3.Timeout(total=10), retries=False
    )
    try:
        reply = pool.request("GET", f"https://127.0.0.1:{port}{path}")
        return reply.status, reply.data.decode(errors="replace")
    finally:
        pool.clear()


def unreadable(cluster: RealCluster, port: int, kind: str) -> int:
    """The extender's `vgpu_extender_unreadable_objects{kind}` gauge (0 when absent)."""
    status, text = extender(cluster, port, "/metrics")
    assert status == 200, text
    found = re.search(rf'^vgpu_extender_unreadable_objects{{kind="{kind}"}} (\S+)$', text, re.M)
    return int(float(found[1])) if found else 0


def ready(cluster: RealCluster, port: int) -> bool:
    return extender(cluster, port, "/readyz")[0] == 200


def on(node: str, obj: Obj) -> Obj:
    """`obj` restricted to `node` (the kubelet's kubernetes.io/hostname label)."""
    obj["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return obj


def failed_scheduling(api: Rest, name: str) -> list[Obj]:
    """kube-scheduler's FailedScheduling Events for the pod."""
    return [e for e in pods.events_for(api, name) if e.get("reason") == "FailedScheduling"]


def bound_to(api: Rest, name: str, timeout: float = 60) -> str:
    """Wait until the pod runs; its node."""
    return str(pods.wait_running(api, name, timeout=timeout)["spec"]["nodeName"])


@contextmanager
def paused(cluster: RealCluster, component: str) -> Iterator[None]:
    """The component's process group stopped (SIGSTOP) for the block, then continued."""
    pid = cluster.procs.children[component].pid
    os.killpg(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(pid, signal.SIGCONT)


def test_node_bs_unreadable_inventory_stops_no_binding_on_node_a_even_after_a_new_leader(
    two_replicas: tuple[RealCluster, ServiceProxy],
) -> None:
    """node-b's agent is paused so that it cannot repair the value (the agent's own repair is
    the last test): what is shown here is the extender's guard alone."""
    cluster, proxy = two_replicas
    api, node_b = cluster.admin, kubelet_of(cluster, "node-b")
    original = inventory_of(cluster, "node-b")
    assert cluster.extender_leader() == "extender-0"
    with paused(cluster, "agent-node-b"):
        try:
            set_inventory(node_b, "node-b", HUGE)
            wait_until(
                lambda: unreadable(cluster, proxy.port, "node") == 1,
                30,
                "the leader to count node-b's inventory unreadable",
            )
            assert ready(cluster, proxy.port)
            api.post(pods.PODS, pods.pod("fits-a", pods.container("main", 10)))
            assert bound_to(api, "fits-a", timeout=30) == "node-a"

            cluster.procs.stop("extender-0", sig=signal.SIGKILL, grace=0)
            wait_until(lambda: cluster.extender_leader() == "extender-1", 60, "extender-1 to lead")
            wait_until(lambda: ready(cluster, proxy.port), 60, "the new leader to be ready")
            assert unreadable(cluster, proxy.port, "node") == 1
            api.post(pods.PODS, pods.pod("fits-a-too", pods.container("main", 10)))
            assert bound_to(api, "fits-a-too", timeout=60) == "node-a"
            assert ready(cluster, proxy.port)
        finally:
            set_inventory(node_b, "node-b", original)
            node_b.close()


def test_an_unreadable_admitted_value_does_not_free_a_running_pods_gpu(
    real_cluster: RealCluster, api: Rest
) -> None:
    """On node-a one whole-GPU pod and a 60-core pod on each other GPU: by
    kube-scheduler's count the node has 120 cores free, so a 100-core pod reaches the extender,
    whose ledger alone knows that no GPU has 100 free. The admission policy lets only vgpu's own
    accounts write `vgpu.io/admitted`: node-a's agent token writes the value."""
    cluster, port = real_cluster, real_cluster.ports["extender"]
    victim, shares = "whole", [f"share-{i}" for i in range(1, cluster.gpu_count("node-a"))]
    api.post(pods.PODS, on("node-a", pods.pod(victim, pods.container("main", WHOLE))))
    bound_to(api, victim)
    for name in shares:  # 60 + 60 > 100: one GPU each
        api.post(pods.PODS, on("node-a", pods.pod(name, pods.container("main", SHARE))))
    for name in shares:
        bound_to(api, name)
    agent = agent_of(cluster, "node-a")
    agent.merge_patch(f"{pods.PODS}/{victim}", {"metadata": {"annotations": {ADMITTED: HUGE}}})
    agent.close()
    wait_until(lambda: unreadable(cluster, port, "pod") == 1, 30, "the extender to see it")
    api.post(pods.PODS, on("node-a", pods.pod("late", pods.container("main", WHOLE))))
    wait_until(
        lambda: pods.node_of(api, "late") or failed_scheduling(api, "late"),
        60,
        "kube-scheduler to bind the late pod or to find no place for it",
    )
    assert not pods.node_of(api, "late"), "bound onto the GPU a running pod holds"
    why = failed_scheduling(api, "late")[0]["message"]
    assert "Insufficient vgpu.io/cores" not in why, f"the extender was not asked: {why}"
    assert ready(cluster, port)

    report = inspect_json(cluster)  # exits 0 (asserted there)
    assert any(
        p["subject"] == f"{pods.NS}/{victim}" and ADMITTED in p["message"]
        for p in report["problems"]
    ), report["problems"]
    (node_a,) = (n for n in report["nodes"] if n["name"] == "node-a")
    assert sorted(g["coresUsed"] for g in node_a["gpus"]) == [SHARE] * len(shares) + [WHOLE]
    assert not pods.node_of(api, "late")


@pytest.fixture
def probed_agent(real_cluster: RealCluster) -> Iterator[int]:
    """node-a's agent restarted with its /healthz port and a 5 s reconcile period; the port.
    Afterwards the agent as the cluster started it."""
    cluster, name = real_cluster, "node-a"
    pods.delete_all(cluster.admin)
    shipped, port = cluster.nodes[name], free_port()
    flags = (f"--metrics-port={port}", "--reconcile-s=5")
    cluster.nodes[name] = dataclasses.replace(shipped, agent_flags=shipped.agent_flags + flags)
    cluster.start_agent(name)  # stops the running one first
    try:
        wait_until(lambda: healthz(port) == 200, 60, "the agent's /healthz")
        _wait_devices_listed(cluster, name)
        yield port
    finally:
        pods.delete_all(cluster.admin)
        cluster.nodes[name] = shipped
        cluster.start_agent(name)
        _wait_devices_listed(cluster, name)


def _wait_devices_listed(cluster: RealCluster, name: str) -> None:
    """The restarted agent has sent the kubelet both device lists, and the node reports them
    allocatable. When a plugin's connection ends the kubelet marks its devices unhealthy
    (`PluginDisconnected` -> `markResourceUnhealthy`, pkg/kubelet/cm/devicemanager/manager.go) and
    refuses admissions needing them until the new ListAndWatch lists them healthy; the node's
    allocatable can still show the old count meanwhile."""

    def listed() -> bool:
        text = cluster.procs.log(f"agent-{name}").read_text(errors="replace")
        since_start = text.rsplit("=== start", 1)[-1]
        return all(
            f"{resource}: ListAndWatch opened" in since_start
            for resource in ("vgpu.io/cores", "vgpu.io/memory")
        )

    wait_until(listed, 60, f"{name}'s agent listing its devices")
    cluster.wait_node_gpus(name)


def healthz(port: int) -> int:
    pool = urllib3.PoolManager(timeout=urllib3.Timeout(total=5), retries=False)
    try:
        return int(pool.request("GET", f"http://127.0.0.1:{port}/healthz").status)
    finally:
        pool.clear()


def readable(cluster: RealCluster, node: str) -> bool:
    try:
        parse_inventory(inventory_of(cluster, node))
    except InventoryError:
        return False
    return True


def test_the_agent_repairs_its_unreadable_inventory_and_keeps_admitting(
    real_cluster: RealCluster, probed_agent: int
) -> None:
    """The same value on the agent's own Node (written by its kubelet): the agent repairs it."""
    cluster, api = real_cluster, real_cluster.admin
    kubelet = kubelet_of(cluster, "node-a")
    set_inventory(kubelet, "node-a", HUGE)
    kubelet.close()
    wait_until(lambda: readable(cluster, "node-a"), 60, "node-a's agent to repair its inventory")
    assert healthz(probed_agent) == 200
    api.post(pods.PODS, on("node-a", pods.pod("after-repair", pods.container("main", 30))))
    assert bound_to(api, "after-repair") == "node-a"
    wait_until(
        lambda: (
            "main" in pods.get(api, "after-repair")["metadata"]["annotations"].get(ADMITTED, "")
        ),
        30,
        "the agent to write vgpu.io/admitted for the pod it admitted",
    )
    assert healthz(probed_agent) == 200
