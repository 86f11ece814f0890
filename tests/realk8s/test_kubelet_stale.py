"""A deleted pod's devices leave the real kubelet's device checkpoint soon after the deletion.

The kubelet frees a deleted pod's devices only at its next Allocate or pod-resources `List`, and
writes its checkpoint only at an Allocate or a ListAndWatch update
(pkg/kubelet/cm/devicemanager/manager.go). A kubelet restarting before that reloads the devices as
taken and admits its first pods without them (docs/handshake.md, "Devices the kubelet still counts
after its restart"). The node agent therefore calls `List` and sends its device lists again
shortly after a pod holding devices is deleted; this test reads the kubelet's checkpoint file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.processes import wait_until
from vgpu.api.assignment import ASSIGNMENT, decode
from vgpu.api.inventory import parse_inventory

pytestmark = pytest.mark.realk8s

# The kubelet's device checkpoint, in the device-plugin directory
# (pkg/kubelet/cm/devicemanager/manager.go, kubeletDeviceManagerCheckpoint).
CHECKPOINT = "kubelet_internal_checkpoint"


def _checkpoint(cluster: RealCluster, node: str) -> Path:
    return cluster.node_dir(node) / "kubelet" / "device-plugins" / CHECKPOINT


def test_a_deleted_pods_devices_leave_the_kubelet_checkpoint(real_cluster: RealCluster) -> None:
    api = real_cluster.admin
    pods.delete_all(api)
    api.post(pods.PODS, pods.pod("released", pods.container("main", 100)))
    running = pods.wait_running(api, "released", timeout=90)
    uid, node = running["metadata"]["uid"], running["spec"]["nodeName"]
    checkpoint = _checkpoint(real_cluster, node)
    assert uid in checkpoint.read_text(), "the kubelet checkpoints an admitted pod's devices"
    pods.delete_all(api)
    wait_until(
        lambda: uid not in checkpoint.read_text(),
        20,
        f"the deleted pod {uid} to leave {node}'s device checkpoint",
    )


def _stale_on(cluster: RealCluster, node: str) -> dict[str, int]:
    """Per GPU, the cores the node's inventory annotation publishes as `kubeletStale`."""
    meta = cluster.admin.get(f"/api/v1/nodes/{node}")["metadata"]
    inventory = parse_inventory(meta["annotations"]["vgpu.io/gpu-inventory"])
    return {g.uuid: g.stale_cores for g in inventory.gpus if g.stale_cores}


def test_devices_the_restarted_kubelet_still_counts_are_not_given_to_a_new_pod(
    real_cluster: RealCluster,
) -> None:
    """A pod holding 30 cores of a GPU is deleted while its kubelet is down (the kubelet restarts
    before it freed them: its checkpoint holds them). A pod needing that whole GPU, bound before
    the kubelet's first pod update, would be refused (UnexpectedAdmissionError): the agent
    publishes the checkpointed devices (`kubeletStale`), the extender does not place onto them,
    and the pod is bound and admitted once the restarted kubelet has freed them."""
    api = real_cluster.admin
    pods.delete_all(api)
    api.post(pods.PODS, pods.pod("holder", pods.container("main", 30)))
    holder = pods.wait_running(api, "holder", timeout=90)
    node = holder["spec"]["nodeName"]
    (share,) = decode(holder["metadata"]["annotations"][ASSIGNMENT]).containers[0].shares
    gpu = str(share.uuid)
    checkpoint = _checkpoint(real_cluster, node)
    real_cluster.procs.stop(f"kubelet-{node}")
    since = time.time()
    pods.delete_all(api)
    assert holder["metadata"]["uid"] in checkpoint.read_text()
    wait_until(lambda: _stale_on(real_cluster, node) == {gpu: 30}, 20, "kubeletStale published")
    whole = pods.pod("whole", pods.container("main", 100), annotations={"vgpu.io/gpu-uuid": gpu})
    api.post(pods.PODS, whole)
    time.sleep(3)  # the scheduler tries it while the kubelet is down
    assert not pods.node_of(api, "whole"), "bound onto devices the kubelet still counts"
    real_cluster.start_kubelet(node)
    started = time.monotonic()
    running = pods.wait_running(api, "whole", timeout=120)  # a refusal fails this at once
    assert running["spec"]["nodeName"] == node
    assert _stale_on(real_cluster, node) == {}
    refusals = [e for e in pods.events_for(api, "whole") if "Admission" in e.get("reason", "")]
    assert not refusals, json.dumps(refusals)[:2000]
    print(
        f"kubelet restart with stale devices: the pod ran {time.monotonic() - started:.1f}s "
        f"after the kubelet's start ({time.time() - since:.1f}s after the deletion)"
    )
    pods.delete_all(api)


def test_a_node_emptied_across_a_kubelet_restart_is_filled_again_by_pods_of_the_same_names(
    real_cluster: RealCluster,
) -> None:
    """Every GPU of a node is held by a whole-GPU pod; the pods are deleted while the kubelet is
    down, so the restarted kubelet reloads all of them as taken. No pod without vGPUs is run to
    settle it: the agent publishes the held devices and has the kubelet free them, and new pods
    of the same names (interchangeable, so settled by the kubelet's pod-resources record, which
    lists one entry per device) all run; and again after a deletion with the kubelet up."""
    api, node = real_cluster.admin, "node-a"
    names = [f"fill-{i}" for i in range(real_cluster.gpu_count(node))]

    def fill() -> None:
        for name in names:
            spec = pods.pod(name, pods.container("main", 100))
            spec["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
            api.post(pods.PODS, spec)
        for name in names:
            assert pods.wait_running(api, name, timeout=90)["spec"]["nodeName"] == node

    pods.delete_all(api)
    fill()
    real_cluster.procs.stop(f"kubelet-{node}")
    pods.delete_all(api)
    wait_until(lambda: len(_stale_on(real_cluster, node)) == len(names), 20, "all GPUs stale")
    real_cluster.start_kubelet(node)
    started = time.monotonic()
    fill()
    print(f"a node emptied across a kubelet restart: full again {time.monotonic() - started:.1f}s")
    pods.delete_all(api)  # and once more with the kubelet up: the names are reused again
    fill()
    assert _stale_on(real_cluster, node) == {}
    refusals = [
        e for n in names for e in pods.events_for(api, n) if "Admission" in e.get("reason", "")
    ]
    assert not refusals, json.dumps(refusals)[:2000]
    pods.delete_all(api)
