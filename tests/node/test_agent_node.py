"""The agent's node-level duties: labels and inventory annotation through the API server (patched
only on change), health, --allow-unassigned, modes, and serving without cluster credentials."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubelet_standin.kubelet import FakeKubelet
from tests.node.agent_harness import CORES, NODE, Box, gpu_of, make_box
from tests.waiting import holds_within, wait_until
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.agent.agent import NodeAgent
from vgpu.agent.config import AgentConfig
from vgpu.node.grants import GrantMode, GrantSettings


@pytest.fixture
def box() -> Iterator[Box]:
    yield from make_box()


def node_patches(box: Box) -> int:
    return box.node_requests("PATCH")


def test_labels_and_inventory_patched_once_then_only_on_change(box: Box) -> None:
    agent = box.start_agent()
    node = box.api.store.get("Node", None, NODE)
    assert node is not None
    assert node["metadata"]["labels"]["vgpu.io/gpu.count"] == "2"
    inventory = json.loads(node["metadata"]["annotations"]["vgpu.io/gpu-inventory"])
    assert [g["healthy"] for g in inventory["gpus"]] == [True, True]
    # Each sync reads the node, then patches only what differs: three more reads (reconcile
    # periods of 0.2 s) with nothing changed must not patch again.
    reads = box.node_requests("GET")
    wait_until(lambda: box.node_requests("GET") >= reads + 3, what="three more syncs of the node")
    assert node_patches(box) == 1 and agent.node_patches == 1
    backend = agent._backend
    assert isinstance(backend, FakeGpuBackend)
    backend.inject_xid(79, box.gpus[1])
    assert holds_within(lambda: node_patches(box) == 2)
    node = box.api.store.get("Node", None, NODE)
    assert node is not None
    inventory = json.loads(node["metadata"]["annotations"]["vgpu.io/gpu-inventory"])
    healthy = {g["uuid"]: g["healthy"] for g in inventory["gpus"]}
    assert healthy == {box.gpus[0]: True, box.gpus[1]: False}


def test_allow_unassigned_admits_only_unreserved_capacity(box: Box) -> None:
    box.start_agent(allow_unassigned=True)
    box.place("a", [("main", 30, 0)], {"main": [(0, 30)]})
    box.admit("a", "main", CORES, 30)
    # 70 cores of GPU 0 are unreserved: an unassigned pod may take 60 of them, not 80.
    ids = [f"{box.gpus[0]}::c{k}" for k in range(30, 90)]
    response = box.kubelet.allocate_ids(CORES, ids)
    assert response.container_responses[0].envs["CUDA_VISIBLE_DEVICES"] == box.gpus[0]
    box.place("b", [("main", 50, 0)], {"main": [(1, 50)]})
    ids = [f"{box.gpus[1]}::c{k}" for k in range(60)]
    with pytest.raises(Exception, match="only 50 unreserved cores"):
        box.kubelet.allocate_ids(CORES, ids)


def test_mps_mode_grants_limits_and_pipe_mount(box: Box) -> None:
    box.start_agent(grants=GrantSettings(GrantMode.MPS, "/run/mps"))
    box.place(
        "m", [("main", 30, 0)], {"main": [(1, 30)]}, annotations={"vgpu.io/cores-limit": "60"}
    )
    ids, response = box.kubelet.allocate(CORES, 30)
    assert gpu_of(ids) == {box.gpus[1]}
    grant = response.container_responses[0]
    assert grant.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "60"
    assert grant.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4608M"
    assert grant.envs["VGPU_CORES"] == "30" and grant.envs["VGPU_CORES_LIMIT"] == "60"
    assert [(m.container_path, m.host_path) for m in grant.mounts] == [("/run/mps", "/run/mps")]


def test_without_credentials_the_kubelet_is_still_served() -> None:
    import shutil
    import tempfile

    sockdir = Path(tempfile.mkdtemp(prefix="vg"))
    kubelet = FakeKubelet(sockdir)
    kubelet.start()
    config = AgentConfig(
        node_name=NODE,
        assignment_key=b"k",
        plugin_dir=sockdir,
        memory_unit_mib=1024,
        stop_grace_s=0.2,
        allow_unassigned=True,  # without it the agent fails closed (tests/handoff)
    )
    agent = NodeAgent(config, FakeGpuBackend.from_spec("1xT4"), None)
    try:
        agent.start()
        assert agent.wait_ready(10)
        assert kubelet.wait_for(lambda: len(kubelet.devices(CORES)) == 100)
        _ids, response = kubelet.allocate(CORES, 40)
        assert response.container_responses[0].envs["VGPU_CORES"] == "40"
    finally:
        agent.stop()
        kubelet.stop()
        shutil.rmtree(sockdir, ignore_errors=True)
