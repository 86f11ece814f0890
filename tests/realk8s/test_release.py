"""A deleted pod's devices leave the real kubelet's device checkpoint soon after the deletion.

The kubelet frees a deleted pod's devices only at its next Allocate or pod-resources `List`, and
writes its checkpoint only at an Allocate or a ListAndWatch update
(pkg/kubelet/cm/devicemanager/manager.go). A kubelet restarting before that reloads the devices as
taken and admits its first pods without them (docs/handshake.md, "Devices the kubelet still counts
after its restart"). The node agent therefore calls `List` and sends its device lists again
shortly after a pod holding devices is deleted; this test reads the kubelet's checkpoint file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.processes import wait_until

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
