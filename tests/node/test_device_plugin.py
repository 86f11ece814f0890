"""The device plugin against the stand-in kubelet, over real unix sockets."""

from __future__ import annotations

import time

import grpc
import pytest

from tests.kubelet_standin.kubelet import FakeKubelet
from tests.node.conftest import CORES, MEMORY, Node, start_plugins
from tests.waiting import wait_until
from vgpu.adapters._proto.deviceplugin.v1beta1 import api_pb2
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.adapters.kubelet.node_plugins import HealthPump
from vgpu.node.health import HealthPolicy, HealthTracker


def registered(node: Node, count: int, timeout: float = 15.0) -> bool:
    return node.kubelet.wait_for(lambda: len(node.kubelet.registrations) >= count, timeout)


def has_devices(node: Node, resource: str, count: int, timeout: float = 15.0) -> bool:
    return node.kubelet.wait_for(lambda: len(node.kubelet.devices(resource)) == count, timeout)


def test_registers_both_resources_and_lists_devices(node: Node) -> None:
    assert registered(node, 2)
    regs = {r.resource: r for r in node.kubelet.registrations}
    assert set(regs) == {CORES, MEMORY}
    for reg in regs.values():
        assert reg.version == "v1beta1"
        assert "/" not in reg.endpoint and (node.options.plugin_dir / reg.endpoint).is_socket()
        assert reg.options.get_preferred_allocation_available
    conn = node.kubelet.connection(CORES)
    assert conn.options.get_preferred_allocation_available and not conn.options.pre_start_required
    assert conn.stub.PreStartContainer(api_pb2.PreStartContainerRequest(devices_ids=["x"])) == (
        api_pb2.PreStartContainerResponse()
    )
    assert has_devices(node, CORES, 200) and has_devices(node, MEMORY, 30)
    assert set(node.kubelet.devices(CORES).values()) == {"Healthy"}
    gpu1 = node.inventory.gpus[1].uuid
    assert node.kubelet.connection(CORES).numa[f"{gpu1}::c5"] == [1]


def test_health_change_pushes_a_full_new_list(node: Node) -> None:
    assert registered(node, 2) and has_devices(node, CORES, 200)
    gpu1 = node.inventory.gpus[1].uuid
    assert node.plugins.set_unhealthy({gpu1})
    assert node.kubelet.wait_for(lambda: node.kubelet.devices(CORES)[f"{gpu1}::c0"] == "Unhealthy")
    devices = node.kubelet.devices(CORES)
    assert len(devices) == 200
    assert sum(h == "Unhealthy" for h in devices.values()) == 100
    assert node.kubelet.wait_for(
        lambda: node.kubelet.devices(MEMORY).get(f"{gpu1}::m0") == "Unhealthy"
    )
    assert not node.plugins.set_unhealthy({gpu1})  # unchanged: no push


def test_xid_through_health_pump_reaches_kubelet(node: Node) -> None:
    assert registered(node, 2) and has_devices(node, CORES, 200)
    backend = FakeGpuBackend(node.inventory)
    tracker = HealthTracker(
        tuple(g.uuid for g in node.inventory.gpus), HealthPolicy(), time.monotonic
    )
    pump = HealthPump(backend.wait_xid, tracker, node.plugins.set_unhealthy, wait_s=0.05)
    pump.start()
    try:
        gpu0 = node.inventory.gpus[0].uuid
        backend.inject_xid(13, gpu0)  # application XID: ignored
        backend.inject_xid(79, gpu0)  # fallen off the bus
        assert node.kubelet.wait_for(
            lambda: node.kubelet.devices(CORES)[f"{gpu0}::c0"] == "Unhealthy"
        )
        backend.set_failure("driver gone")
        gpu1 = node.inventory.gpus[1].uuid
        assert node.kubelet.wait_for(
            lambda: node.kubelet.devices(CORES)[f"{gpu1}::c0"] == "Unhealthy"
        )
    finally:
        pump.stop()


def test_preferred_allocation_binpacks_and_allocate_grants_env(node: Node) -> None:
    assert registered(node, 2) and has_devices(node, CORES, 200)
    first, response = node.kubelet.allocate(CORES, 30)
    gpu = first[0].split("::")[0]
    assert all(i.startswith(gpu + "::") for i in first)
    envs = response.container_responses[0].envs
    assert envs["CUDA_VISIBLE_DEVICES"] == gpu and envs["VGPU_CORES"] == "30"
    second, _ = node.kubelet.allocate(CORES, 50)
    assert all(i.startswith(gpu + "::") for i in second)  # binpacked onto the same GPU
    # The memory plugin's device list may arrive after the cores plugin's.
    assert node.kubelet.wait_for(lambda: len(node.kubelet.devices(MEMORY)) == 30, 15.0)
    _, memory = node.kubelet.allocate(MEMORY, 4)
    assert memory.container_responses[0].envs["VGPU_MEMORY_LIMIT_MIB"] == "4096"


def test_allocate_refuses_a_fraction_split_over_gpus(node: Node) -> None:
    assert registered(node, 2) and has_devices(node, CORES, 200)
    a, b = (g.uuid for g in node.inventory.gpus)
    with pytest.raises(grpc.RpcError) as err:
        node.kubelet.allocate_ids(CORES, [f"{a}::c0", f"{b}::c0"])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "IDs span 2 GPUs" in (err.value.details() or "")


def test_kubelet_ignoring_the_preference_can_be_refused(node: Node) -> None:
    assert registered(node, 2) and has_devices(node, CORES, 200)
    first = min(g.uuid for g in node.inventory.gpus)  # the GPU whose IDs the kubelet sorts first
    ids = [f"{first}::c{k}" for k in range(60)]
    node.kubelet.allocate_ids(CORES, ids)
    node.kubelet.allocated[CORES] = set(ids)
    # Without the preference the kubelet takes the 40 left on `first` plus 60 of the other GPU.
    with pytest.raises(grpc.RpcError) as err:
        node.kubelet.allocate(CORES, 100, use_preferred=False)
    assert "a share smaller than a GPU must be on one GPU" in (err.value.details() or "")


def test_reregisters_within_two_seconds_after_kubelet_restart(node: Node) -> None:
    assert registered(node, 2) and has_devices(node, CORES, 200)
    old = {r.endpoint for r in node.kubelet.registrations}
    node.kubelet.restart()
    started = time.monotonic()
    assert registered(node, 4, timeout=2.0)
    assert time.monotonic() - started < 2.0
    new = {r.endpoint for r in node.kubelet.registrations[2:]}
    assert not new & old
    assert all((node.options.plugin_dir / e).is_socket() for e in new)
    assert has_devices(node, CORES, 200)
    node.kubelet.allocate(CORES, 10)


def test_reregisters_when_own_socket_is_deleted(node: Node) -> None:
    assert registered(node, 2)
    endpoint = next(r.endpoint for r in node.kubelet.registrations if r.resource == CORES)
    (node.options.plugin_dir / endpoint).unlink()
    assert registered(node, 3, timeout=2.0)
    assert node.kubelet.registrations[2].resource == CORES


def test_plugin_restart_registers_again(node: Node) -> None:
    assert registered(node, 2) and has_devices(node, CORES, 200)
    node.plugins.manager.stop(0.2)
    assert node.kubelet.wait_for(lambda: not node.kubelet.connection(CORES).stream_open)
    assert set(node.kubelet.devices(CORES).values()) == {"Unhealthy"}  # stream broke
    node.plugins = start_plugins(node.inventory, node.options)
    assert registered(node, 4)
    assert node.kubelet.wait_for(lambda: set(node.kubelet.devices(CORES).values()) == {"Healthy"})


def test_registration_is_retried_until_the_kubelet_accepts(node: Node) -> None:
    node.plugins.manager.stop(0.2)
    kubelet = FakeKubelet(node.options.plugin_dir / "k", fail_registrations=3)
    kubelet.start()
    options = type(node.options)(plugin_dir=kubelet.dir, register_timeout_s=2.0, stop_grace_s=0.2)
    plugins = start_plugins(node.inventory, options)
    try:
        assert kubelet.wait_for(lambda: len(kubelet.registrations) == 2, timeout=5.0)
        wait_until(plugins.manager.registered, 2.0, "the plugins to register")
    finally:
        plugins.manager.stop(0.2)
        kubelet.stop()
