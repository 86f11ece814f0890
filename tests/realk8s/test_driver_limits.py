"""The driver memory backend on the real kubelet: the agent asks for `PreStartContainer`, the
kubelet calls it before each container of a pod starts (its init container too), and the agent
sets the pod's hard limit through NVML on the pod's cgroup; a PreStart that cannot set it fails
the container's start, and the kubelet shows the agent's message on the pod.

The agent runs over the stand-in NVML and a fake cgroup tree (`tests.realk8s.standin_limits`).
The test makes the pod's cgroup only after it saw the start refused for the lack of it, so the
refusal is seen first, then the kubelet's retry.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.grants import granted
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Obj
from tests.realk8s.standin_limits import LimitedGpus

pytestmark = pytest.mark.realk8s

NODE = "node-b"
MIB = 1 << 20


class LimitedNode:
    """NODE's agent with the driver's memory limits on, over the stand-in NVML."""

    def __init__(self, cluster: RealCluster, root: Path) -> None:
        self.cluster = cluster
        self.gpus = LimitedGpus.make(root, NODE, "T4", 16 << 30)
        self.original = cluster.nodes[NODE]
        self.spec = replace(
            self.original,
            gpus=str(self.gpus.inventory),
            agent_flags=self.original.agent_flags + self.gpus.flags,
            agent_env=tuple(self.gpus.env().items()),
        )

    def answer_times(self) -> list[float]:
        """Milliseconds each PreStartContainer answered so far took (the agent logs each)."""
        log = self.cluster.procs.log(f"agent-{NODE}").read_text(errors="replace")
        return [float(ms) for ms in re.findall(r"PreStartContainer answered in ([0-9.]+) ms", log)]

    def limits_set(self, uid: str) -> int:
        """How many PreStart calls set the pod's limits (the agent logs each)."""
        log = self.cluster.procs.log(f"agent-{NODE}").read_text(errors="replace")
        return log.count(f"pod {uid}: driver memory limits set on")


@pytest.fixture(scope="module")
def limited(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LimitedNode]:
    node = LimitedNode(real_cluster, tmp_path_factory.mktemp("driver-limits"))
    pods.delete_all(real_cluster.admin)
    real_cluster.restart_node(node.spec)
    try:
        yield node
    finally:
        pods.delete_all(real_cluster.admin)
        real_cluster.restart_node(node.original)
        node.gpus.standin.close()


def _waiting(pod: Obj, statuses: str) -> tuple[str, str]:
    """(reason, message) of the first waiting container in `statuses` of the pod."""
    for status in pod.get("status", {}).get(statuses) or ():
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("message"):
            return str(waiting.get("reason")), str(waiting["message"])
    return "", ""


def test_prestart_sets_the_pods_limit_before_each_container_and_a_refusal_shows_on_the_pod(
    real_cluster: RealCluster, limited: LimitedNode
) -> None:
    setup = {
        **pods.container("setup", 10, 4),
        "env": [{"name": "FAKE_CRI_EXIT_CODE", "value": "0"}],
    }
    pod = pods.pod("limited", pods.container("main", 20, 8), init=[setup])
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    uid = real_cluster.admin.post(pods.PODS, pod)["metadata"]["uid"]
    refused = wait_until(
        lambda: _waiting(pods.get(real_cluster.admin, "limited"), "initContainerStatuses")[1],
        90,
        "the init container's start refused by PreStart",
    )
    reason, _ = _waiting(pods.get(real_cluster.admin, "limited"), "initContainerStatuses")
    assert reason == "CreateContainerConfigError", reason
    assert f"pod {uid}: no cgroup under {limited.gpus.cgroupfs}" in refused
    assert limited.limits_set(uid) == 0
    assert real_cluster.container("limited", "setup") is None  # the runtime was never asked
    cgroup = limited.gpus.pod_cgroup(uid)  # the kubelet retries at its next sync of the pod
    running = pods.wait_running(real_cluster.admin, "limited", timeout=90)
    want = granted(running)
    assert want["setup"]["GPUS"] == want["main"]["GPUS"]  # the app reuses the init's GPU
    limit = int(want["main"]["VGPU_MEMORY_LIMIT_MIB"]) * MIB  # more than the init's
    assert limited.gpus.hard_limit(cgroup, want["main"]["GPUS"]) == limit
    # The kubelet calls PreStart of each plugin a container holds devices of (cores and
    # memory here), before each container: init, then main; each sets the pod's limit.
    assert limited.limits_set(uid) == 4
    # ...and waits at most 30 s for each answer (k8s.io/kubelet pkg/apis/deviceplugin/v1beta1,
    # KubeletPreStartContainerRPCTimeoutInSecs): the agent answers each in well under a second
    took = limited.answer_times()
    assert len(took) >= 4 and max(took) < 1000, took
