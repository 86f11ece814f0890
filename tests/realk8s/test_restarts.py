"""Restarts on the real cluster: the kubelet (the plugins register again, capacity returns) and
the node agent between a pod's binding and its admission (the pod gets exactly its grant)."""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import REPO, RealCluster
from tests.realk8s.grants import given, granted
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Obj, Rest
from vgpu.api.assignment import ADMITTED

pytestmark = pytest.mark.realk8s

NODE = "node-a"
GATE = "example.com/gate"


def _fresh_sockets(directory: Path, since: float) -> set[str]:
    """Names of the sockets in `directory` created after `since` (wall-clock seconds)."""
    return {p.name for p in directory.iterdir() if p.is_socket() and p.stat().st_ctime > since}


def test_kubelet_restart_plugins_register_again(real_cluster: RealCluster) -> None:
    """The restarted kubelet deletes the device-plugin directory's sockets and makes a new
    kubelet.sock; the agent notices and registers both resources again, and the kubelet
    reports the capacity again (printed: seconds from the kubelet's start)."""
    pods.delete_all(real_cluster.admin)
    plugins = real_cluster.node_dir(NODE) / "kubelet" / "device-plugins"
    real_cluster.procs.stop(f"kubelet-{NODE}")
    since, started = time.time(), time.monotonic()
    real_cluster.start_kubelet(NODE)

    def registered() -> bool:
        fresh = _fresh_sockets(plugins, since)
        return "kubelet.sock" in fresh and len(fresh) >= 3  # kubelet.sock, cores, memory

    wait_until(registered, 60, "a new kubelet.sock and both plugin sockets made again")
    registered_s = time.monotonic() - started
    assert {"kubelet.sock"} < _fresh_sockets(plugins, since)
    real_cluster.wait_node_gpus(NODE, since=since)
    capacity_s = time.monotonic() - started
    kubelet = real_cluster.procs.children[f"kubelet-{NODE}"].pid
    cwd = Path(f"/proc/{kubelet}/cwd").resolve()  # its log cleanup removes what "*" matches
    scratch = (real_cluster.node_dir(NODE) / "kubelet-cwd").resolve()
    assert cwd == scratch and not any(cwd.iterdir()), cwd
    assert registered_s <= capacity_s
    print(
        f"kubelet restart: plugins registered again after {registered_s:.1f}s; the capacity "
        f"reported by the new kubelet after {capacity_s:.1f}s"
    )
    after = pods.pod("after-restart", pods.container("main", 100))
    after["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODE}  # the restarted kubelet
    real_cluster.admin.post(pods.PODS, after)
    running = pods.wait_running(real_cluster.admin, "after-restart", timeout=90)
    assert running["spec"]["nodeName"] == NODE
    assert given(real_cluster, "after-restart", "main") == granted(running)["main"]
    print(f"kubelet restart: a vGPU pod admitted after {time.monotonic() - started:.1f}s")
    pods.delete_all(real_cluster.admin)


@pytest.fixture
def gate(real_cluster: RealCluster) -> Iterator[int]:
    """A one-device plugin (tests/realk8s/gate.py) registered with NODE's kubelet; its pid."""
    pods.delete_all(real_cluster.admin)
    plugins = real_cluster.node_dir(NODE) / "kubelet" / "device-plugins"
    pid = real_cluster.procs.start(
        f"gate-{NODE}",
        [sys.executable, "-m", "tests.realk8s.gate", str(plugins), GATE],
        env={"PYTHONPATH": str(REPO)},
    )

    def offered() -> bool:
        node = real_cluster.admin.get(f"/api/v1/nodes/{NODE}")
        return bool(node["status"].get("allocatable", {}).get(GATE) == "1")

    wait_until(offered, 60, f"{NODE} to offer {GATE}", real_cluster._watching(f"gate-{NODE}"))
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGCONT)
        pods.delete_all(real_cluster.admin)
        real_cluster.procs.stop(f"gate-{NODE}")


def _gate_pod() -> Obj:
    held = pods.container("hold")
    held["resources"]["limits"][GATE] = "1"
    spec = pods.pod("gate-holder", held)
    spec["spec"]["nodeName"] = NODE  # no scheduler: straight to the kubelet
    return spec


def _admitted(api: Rest, name: str) -> bool:
    return ADMITTED in pods.get(api, name)["metadata"].get("annotations", {})


def test_agent_restart_between_bind_and_admission(real_cluster: RealCluster, gate: int) -> None:
    """The kubelet is held before admission (a pod asking the stopped gate plugin's device is
    ahead of ours); our pod is bound by the extender; the agent is stopped and started again;
    the gate opens. The restarted agent learns the pending pod from its first read of the
    API server and grants exactly the pod's assignment."""
    api = real_cluster.admin
    os.kill(gate, signal.SIGSTOP)
    api.post(pods.PODS, _gate_pod())
    time.sleep(2)  # the kubelet takes the gate pod and waits in its GetPreferredAllocation
    ours = pods.pod("held-share", pods.container("main", 40, 12))
    ours["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    api.post(pods.PODS, ours)
    wait_until(lambda: pods.node_of(api, "held-share"), 60, "held-share bound by the extender")
    real_cluster.procs.stop(f"agent-{NODE}")
    time.sleep(2)
    since = time.time()
    real_cluster.start_agent(NODE)
    agent_log = real_cluster.procs.log(f"agent-{NODE}")
    wait_until(
        lambda: "registered with the kubelet" in agent_log.read_text().rsplit("=== start", 1)[-1],
        60,
        "the restarted agent to register",
        real_cluster._watching(f"agent-{NODE}"),
    )
    # Still held: the kubelet has not admitted our pod, the old agent never saw its Allocate.
    assert real_cluster.container("held-share", "main") is None
    assert not _admitted(api, "held-share")
    assert pods.get(api, "held-share")["status"].get("phase") == "Pending"
    os.kill(gate, signal.SIGCONT)
    bound = pods.wait_running(api, "held-share", timeout=90)
    want = granted(bound)["main"]
    assert (want["VGPU_CORES"], want["VGPU_MEMORY_LIMIT_MIB"]) == ("40", str(12 * 256))
    assert given(real_cluster, "held-share", "main") == want
    wait_until(functools.partial(_admitted, api, "held-share"), 30, "held-share marked admitted")
    print(f"agent restart while held: the pod admitted {time.time() - since:.1f}s after it")
