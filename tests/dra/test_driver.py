"""The DRA driver in-process: real gRPC over unix sockets to a test client playing the kubelet,
the fake API server over real HTTP for slices and claims. (The real kubelet and scheduler are in
the realk8s tier; this is the fast check of the driver's own behaviour.)"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.kubeapi.server import FakeApiServer
from tests.waiting import holds_within
from vgpu.adapters._proto.dra.v1 import api_pb2 as dra_pb2
from vgpu.adapters._proto.dra.v1 import api_pb2_grpc as dra_grpc
from vgpu.adapters._proto.drahealth.v1 import api_pb2 as health_pb2
from vgpu.adapters._proto.drahealth.v1 import api_pb2_grpc as health_grpc
from vgpu.adapters._proto.pluginregistration.v1 import api_pb2 as reg_pb2
from vgpu.adapters._proto.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from vgpu.adapters.draplugin import DraSockets
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.adapters.kube.dra_calls import DraKubeApi
from vgpu.daemons.dra_driver.driver import DraConfig, DraDriver
from vgpu.node.health import HealthPolicy

NODE = "node-a"


class Env:
    def __init__(self, root: Path, api: FakeApiServer) -> None:
        self.root, self.api = root, api
        self.backend = FakeGpuBackend.from_spec("2xT4", seed=NODE)
        self.gpus = [g.uuid for g in self.backend.inventory().gpus]
        self.drivers: list[DraDriver] = []
        self.clients: list[Any] = []
        api.store.put({"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE}})

    def start(self, nvml: Any = None, **overrides: Any) -> DraDriver:
        if self.drivers:  # a restart: the stopped driver closed its backend
            self.backend = FakeGpuBackend.from_spec("2xT4", seed=NODE)
        settings: dict[str, Any] = {
            "node_name": NODE,
            "sockets": DraSockets("vgpu.io", self.root / "plugins", self.root / "registry"),
            "cdi_dir": self.root / "cdi",
            "memory_unit_mib": 1024,
            "resync_s": 0.2,
            "retry_s": 0.05,
            "stop_grace_s": 0.1,
        }
        config = DraConfig(**(settings | overrides))
        client = self.api.api_client()
        self.clients.append(client)
        kube = DraKubeApi(client, request_timeout=5)
        driver = DraDriver(config, self.backend, kube, nvml=nvml)
        self.drivers.append(driver)
        driver.start()
        assert driver.wait_ready(10)
        return driver

    def channel(self, path: Path) -> grpc.Channel:
        return grpc.insecure_channel(f"unix://{path}")

    def slice_devices(self) -> list[str]:
        obj = self.api.store.get("ResourceSlice", None, "node-a-vgpu-io")
        return [d["name"] for d in obj["spec"]["devices"]] if obj else []

    def put_claim(self, name: str, *results: dict[str, Any]) -> str:
        obj = self.api.store.put(
            {
                "kind": "ResourceClaim",
                "apiVersion": "resource.k8s.io/v1",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": []}},
                "status": {"allocation": {"devices": {"results": list(results)}}},
            }
        )
        return str(obj["metadata"]["uid"])

    def prepare(self, name: str, uid: str) -> dra_pb2.NodePrepareResourceResponse:
        driver = self.drivers[-1]
        with self.channel(driver.config.sockets.dra_socket) as ch:
            stub = dra_grpc.DRAPluginStub(ch)  # type: ignore[no-untyped-call]
            req = dra_pb2.NodePrepareResourcesRequest(
                claims=[dra_pb2.Claim(namespace="default", name=name, uid=uid)]
            )
            reply: dra_pb2.NodePrepareResourcesResponse = stub.NodePrepareResources(req, timeout=5)
            return reply.claims[uid]

    def unprepare(self, name: str, uid: str) -> str:
        driver = self.drivers[-1]
        with self.channel(driver.config.sockets.dra_socket) as ch:
            stub = dra_grpc.DRAPluginStub(ch)  # type: ignore[no-untyped-call]
            req = dra_pb2.NodeUnprepareResourcesRequest(
                claims=[dra_pb2.Claim(namespace="default", name=name, uid=uid)]
            )
            return str(stub.NodeUnprepareResources(req, timeout=5).claims[uid].error)


def share(device: str, cores: str, memory: str) -> dict[str, Any]:
    return {
        "request": "gpu",
        "driver": "vgpu.io",
        "pool": NODE,
        "device": device,
        "shareID": "s-1",
        "consumedCapacity": {"cores": cores, "memory": memory},
    }


@pytest.fixture
def env() -> Iterator[Env]:
    with tempfile.TemporaryDirectory(prefix="vgpu-dra-", dir="/tmp") as d, FakeApiServer() as api:
        e = Env(Path(d), api)
        try:
            yield e
        finally:
            for driver in e.drivers:
                driver.stop()
            for client in e.clients:
                client.close()


def test_registers_as_a_dra_plugin_and_publishes_its_slice(env: Env) -> None:
    driver = env.start()
    with env.channel(driver.config.sockets.registration_socket) as ch:
        stub = reg_grpc.RegistrationStub(ch)  # type: ignore[no-untyped-call]
        info = stub.GetInfo(reg_pb2.InfoRequest(), timeout=5)
        stub.NotifyRegistrationStatus(reg_pb2.RegistrationStatus(plugin_registered=True))
    assert info.type == "DRAPlugin" and info.name == "vgpu.io"
    assert info.endpoint == str(driver.config.sockets.dra_socket)
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1.DRAResourceHealth"]
    assert driver.server.registration.registered.is_set()
    assert env.slice_devices() == ["gpu-0", "gpu-1"]
    stored = env.api.store.get("ResourceSlice", None, "node-a-vgpu-io")
    assert stored is not None
    owner = stored["metadata"]
    assert owner["ownerReferences"][0]["name"] == NODE


def test_prepare_writes_cdi_checkpoints_and_is_idempotent(env: Env) -> None:
    driver = env.start()
    uid = env.put_claim("c1", share("gpu-1", "30", "4Gi"))
    first = env.prepare("c1", uid)
    assert first.error == ""
    (dev,) = first.devices
    assert (dev.pool_name, dev.device_name, dev.share_id) == (NODE, "gpu-1", "s-1")
    assert list(dev.cdi_device_ids) == [f"vgpu.io/claim={uid}-gpu", f"nvidia.com/gpu={env.gpus[1]}"]
    spec = json.loads((env.root / "cdi" / f"vgpu.io-{uid}.json").read_text())
    env_vars = dict(e.split("=", 1) for e in spec["devices"][0]["containerEdits"]["env"])
    assert env_vars["CUDA_VISIBLE_DEVICES"] == env.gpus[1]
    assert env_vars["VGPU_CORES"] == "30" and env_vars["VGPU_MEMORY_LIMIT_MIB"] == "4096"
    assert len(driver.checkpoint) == 1
    # Again: the same answer, without reading the claim (gone from the API server by now).
    env.api.store.remove("ResourceClaim", "default", "c1")
    assert env.prepare("c1", uid) == first


def test_prepared_claims_survive_a_driver_restart(env: Env) -> None:
    env.start()
    uid = env.put_claim("c1", share("gpu-0", "50", "2Gi"))
    first = env.prepare("c1", uid)
    env.drivers[-1].stop()
    cdi = env.root / "cdi" / f"vgpu.io-{uid}.json"
    cdi.unlink()  # e.g. /var/run is a tmpfs and the node rebooted
    env.api.store.remove("ResourceClaim", "default", "c1")
    env.start()
    assert cdi.exists()  # rewritten from the checkpoint at start
    assert env.prepare("c1", uid) == first
    assert env.unprepare("c1", uid) == ""
    assert not cdi.exists() and len(env.drivers[-1].checkpoint) == 0
    assert env.unprepare("c1", uid) == ""  # unknown claims are done


def test_refusals_reach_the_kubelet(env: Env) -> None:
    env.start()
    uid = env.put_claim("far", {**share("gpu-0", "10", "1Gi"), "pool": "node-b"})
    assert "pool 'node-b', this is 'node-a'" in env.prepare("far", uid).error
    assert "cannot read claim default/missing" in env.prepare("missing", "uid-x").error


def test_unhealthy_gpu_is_withdrawn_reported_and_restored(env: Env) -> None:
    driver = env.start(health=HealthPolicy(recovery_s=1.0))
    with env.channel(driver.config.sockets.dra_socket) as ch:
        stream = health_grpc.DRAResourceHealthStub(ch).NodeWatchResources(  # type: ignore[no-untyped-call]
            health_pb2.NodeWatchResourcesRequest(), timeout=10
        )
        first = next(stream)
        assert [(d.device.device_name, d.health) for d in first.devices] == [
            ("gpu-0", health_pb2.HEALTHY),
            ("gpu-1", health_pb2.HEALTHY),
        ]
        env.backend.inject_xid(79, env.gpus[1])
        second = next(stream)
        assert second.devices[1].health == health_pb2.UNHEALTHY
        assert holds_within(lambda: env.slice_devices() == ["gpu-0"])
        uid = env.put_claim("c1", share("gpu-1", "10", "1Gi"))
        assert "unhealthy" in env.prepare("c1", uid).error
        third = next(stream)  # recovery after a quiet second
        assert third.devices[1].health == health_pb2.HEALTHY
        stream.cancel()
    assert holds_within(lambda: env.slice_devices() == ["gpu-0", "gpu-1"])


def test_fullest_first_slice_follows_allocations(env: Env) -> None:
    env.start(slice_order="fullest")
    assert env.slice_devices() == ["gpu-0", "gpu-1"]
    env.put_claim("c1", share("gpu-1", "40", "1Gi"))
    assert holds_within(lambda: env.slice_devices() == ["gpu-1", "gpu-0"])
    stored = env.api.store.get("ResourceSlice", None, "node-a-vgpu-io")
    assert stored is not None
    generation = stored["spec"]["pool"]
    assert generation["generation"] >= 2


def test_a_registering_kubelet_gets_the_slice_back_at_once(env: Env) -> None:
    # A starting kubelet deletes its node's slices (pkg/kubelet/cm/dra/plugin), maybe after
    # registering the driver: the slice comes back without waiting for the resync.
    driver = env.start(resync_s=600)
    env.api.store.remove("ResourceSlice", None, "node-a-vgpu-io")
    with env.channel(driver.config.sockets.registration_socket) as ch:
        stub = reg_grpc.RegistrationStub(ch)  # type: ignore[no-untyped-call]
        stub.NotifyRegistrationStatus(reg_pb2.RegistrationStatus(plugin_registered=True))
    assert holds_within(lambda: env.slice_devices() == ["gpu-0", "gpu-1"])
    env.api.store.remove("ResourceSlice", None, "node-a-vgpu-io")  # wiped a moment later
    assert holds_within(lambda: env.slice_devices() == ["gpu-0", "gpu-1"])
