"""The node agent daemon reads the kubelet's device checkpoint for regular init containers.

The pod-resources `List` never reports a regular init container
(pkg/kubelet/apis/podresources/server_v1.go `List`); the kubelet's checkpoint does, one entry per
container with its `ContainerName` (pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go
`PodDevicesEntry`), written after each container's allocation (manager.go
`allocateContainerResources` ends with `writeCheckpoint`). An agent restarted between a pod's init
container and its app container must learn from that file that the init container was
allocated, or it expects the init container's call again and refuses (or mis-grants) the app
container's, whose devices the kubelet draws from the init container's (`devicesToReuse`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.node.agent_harness import CORES, KEY, Box, make_box
from tests.waiting import holds_within
from vgpu.api.assignment import binding_annotations
from vgpu.core.ids import PodKey
from vgpu.node.checkpoint import CHECKPOINT_FILE


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def _checkpoint(box: Box, uid: str, container: str, ids: list[str]) -> None:
    """The kubelet's checkpoint file, as it writes it after allocating `container`."""
    entry = {
        "PodUID": uid,
        "ContainerName": container,
        "ResourceName": CORES,
        "DeviceIDs": {"0": ids},
        "AllocResp": "",
    }
    doc = {"Data": {"PodDeviceEntries": [entry], "RegisteredDevices": {}}, "Checksum": 0}
    (box.dir / CHECKPOINT_FILE).write_text(json.dumps(doc))


def test_a_restarted_agent_admits_the_init_container_the_kubelets_checkpoint_names(
    box: Box,
) -> None:
    box.start_agent()
    pod = box.create_pod("i", [("main", 25, 0)], init=[("setup", 30, 0)])
    assignment = box.assignment(pod, {"setup": [(0, 30)], "main": [(0, 25)]})
    box.bind(pod, binding_annotations(assignment, KEY))
    setup, _ = box.kubelet.allocate(CORES, 30)  # the List never shows a regular init container
    _checkpoint(box, pod["metadata"]["uid"], "setup", setup)
    box.stop_agent()
    agent = box.start_agent()
    key = PodKey("default/i")
    assert holds_within(lambda: agent.handoff.admitted_containers(key) == ["setup"]), (
        agent.handoff.admitted_containers(key)
    )
    # The app container's devices come from the init container's (the kubelet's reuse pool).
    response = box.kubelet.allocate_ids(CORES, setup[:25])
    envs = dict(response.container_responses[0].envs)
    assert envs["VGPU_CORES"] == "25", envs
    assert envs["VGPU_MEMORY_LIMIT_MIB"] == str(15360 * 25 // 100), "main got its own grant"
