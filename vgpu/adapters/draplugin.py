"""The DRA driver's kubelet-facing gRPC: plugin registration, `v1.DRAPlugin`, DRA health.

The kubelet's plugin watcher finds the registration socket in its `plugins_registry` directory
and calls `GetInfo`: type `DRAPlugin`, the driver name, the endpoint of the DRA socket and the
services served there (`v1.DRAPlugin`, `v1.DRAResourceHealth`); then `NotifyRegistrationStatus`.
The kubelet re-discovers the socket after its own restart, so there is nothing to re-register.
(Behaviour: k8s.io/kubernetes pkg/kubelet/pluginmanager and pkg/kubelet/cm/dra/plugin; the
service names are k8s.io/kubelet v0.37.2 `pkg/apis/dra/v1/types.go` and
`pkg/apis/dra-health/v1/types.go`.)

This module only translates: preparation, unpreparation and health come from injected
callables. Sockets are removed before binding and on stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from vgpu.adapters._proto.dra.v1 import api_pb2 as dra_pb2
from vgpu.adapters._proto.dra.v1 import api_pb2_grpc as dra_grpc
from vgpu.adapters._proto.drahealth.v1 import api_pb2 as health_pb2
from vgpu.adapters._proto.drahealth.v1 import api_pb2_grpc as health_grpc
from vgpu.adapters._proto.pluginregistration.v1 import api_pb2 as reg_pb2
from vgpu.adapters._proto.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from vgpu.adapters.kubelet.device_plugin import MAX_UNIX_PATH, KubeletError
from vgpu.dra.prepare import PreparedClaim
from vgpu.node.grants import Refusal

log = logging.getLogger(__name__)

DRA_SERVICE = "v1.DRAPlugin"
HEALTH_SERVICE = "v1.DRAResourceHealth"
PLUGIN_TYPE = "DRAPlugin"
DEFAULT_PLUGINS_DIR = Path("/var/lib/kubelet/plugins")
DEFAULT_REGISTRY_DIR = Path("/var/lib/kubelet/plugins_registry")

Prepare = Callable[[str, str, str], PreparedClaim | Refusal]
"""(namespace, name, uid) -> the prepared claim or why not."""
Unprepare = Callable[[str], str | None]
"""uid -> an error message, or None when done (or nothing was prepared)."""


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    """One device's health as the kubelet's health stream carries it."""

    pool: str
    device: str
    healthy: bool
    message: str = ""


class HealthBoard:
    """The devices' current health; a change wakes every open health stream."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._version = 0
        self._devices: tuple[DeviceHealth, ...] = ()

    def publish(self, devices: Sequence[DeviceHealth]) -> None:
        with self._cond:
            if tuple(devices) != self._devices:
                self._devices = tuple(devices)
                self._version += 1
                self._cond.notify_all()

    def wait_newer(self, version: int, timeout_s: float) -> tuple[int, tuple[DeviceHealth, ...]]:
        with self._cond:
            self._cond.wait_for(lambda: self._version != version, timeout=timeout_s)
            return self._version, self._devices

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class DraServicer(dra_grpc.DRAPluginServicer):
    def __init__(self, prepare: Prepare, unprepare: Unprepare) -> None:
        self._prepare = prepare
        self._unprepare = unprepare

    def NodePrepareResources(
        self, request: dra_pb2.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra_pb2.NodePrepareResourcesResponse:
        response = dra_pb2.NodePrepareResourcesResponse()
        for claim in request.claims:
            try:
                result = self._prepare(claim.namespace, claim.name, claim.uid)
            except Exception as e:  # a bug must fail this claim, never the daemon
                log.exception("preparing claim %s/%s failed", claim.namespace, claim.name)
                result = Refusal(f"internal error: {type(e).__name__}: {e}")
            entry = response.claims[claim.uid]
            if isinstance(result, Refusal):
                entry.error = result.reason
                continue
            for d in result.devices:
                device = entry.devices.add(
                    request_names=[d.request],
                    pool_name=d.pool,
                    device_name=d.device,
                    cdi_device_ids=list(d.cdi_ids),
                )
                if d.share_id is not None:
                    device.share_id = d.share_id
        return response

    def NodeUnprepareResources(
        self, request: dra_pb2.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra_pb2.NodeUnprepareResourcesResponse:
        response = dra_pb2.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            try:
                error = self._unprepare(claim.uid)
            except Exception as e:
                log.exception("unpreparing claim %s/%s failed", claim.namespace, claim.name)
                error = f"internal error: {type(e).__name__}: {e}"
            response.claims[claim.uid].error = error or ""
        return response


class HealthServicer(health_grpc.DRAResourceHealthServicer):
    def __init__(self, board: HealthBoard, stopping: threading.Event) -> None:
        self._board = board
        self._stopping = stopping

    def NodeWatchResources(
        self, request: health_pb2.NodeWatchResourcesRequest, context: grpc.ServicerContext
    ) -> Iterator[health_pb2.NodeWatchResourcesResponse]:
        version = -1
        while not self._stopping.is_set() and context.is_active():
            newer, devices = self._board.wait_newer(version, timeout_s=1.0)
            if newer == version:
                continue
            version = newer
            now = int(time.time())
            yield health_pb2.NodeWatchResourcesResponse(
                devices=[
                    health_pb2.DeviceHealth(
                        device=health_pb2.DeviceIdentifier(pool_name=d.pool, device_name=d.device),
                        health=health_pb2.HEALTHY if d.healthy else health_pb2.UNHEALTHY,
                        last_updated_time=now,
                        message=d.message,
                    )
                    for d in devices
                ]
            )


class RegistrationServicer(reg_grpc.RegistrationServicer):
    def __init__(
        self, driver: str, endpoint: str, on_registered: Callable[[], None] | None = None
    ) -> None:
        self._driver = driver
        self._endpoint = endpoint
        self._on_registered = on_registered
        self.registered = threading.Event()
        self.error = ""

    def GetInfo(
        self, request: reg_pb2.InfoRequest, context: grpc.ServicerContext
    ) -> reg_pb2.PluginInfo:
        return reg_pb2.PluginInfo(
            type=PLUGIN_TYPE,
            name=self._driver,
            endpoint=self._endpoint,
            supported_versions=[DRA_SERVICE, HEALTH_SERVICE],
        )

    def NotifyRegistrationStatus(
        self, request: reg_pb2.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg_pb2.RegistrationStatusResponse:
        if request.plugin_registered:
            log.info("%s: registered with the kubelet", self._driver)
            self.error = ""
            self.registered.set()
            if self._on_registered is not None:
                self._on_registered()
        else:
            self.error = request.error
            self.registered.clear()
            log.error("%s: the kubelet refused the registration: %s", self._driver, request.error)
        return reg_pb2.RegistrationStatusResponse()


@dataclass(frozen=True, slots=True)
class DraSockets:
    """Where the driver listens: the DRA socket in its plugin directory and the registration
    socket in the kubelet's registry directory."""

    driver: str
    plugins_dir: Path = DEFAULT_PLUGINS_DIR
    registry_dir: Path = DEFAULT_REGISTRY_DIR
    max_workers: int = 8

    @property
    def dra_socket(self) -> Path:
        return self.plugins_dir / self.driver / "dra.sock"

    @property
    def registration_socket(self) -> Path:
        return self.registry_dir / f"{self.driver}-reg.sock"


def _listen(server: grpc.Server, path: Path) -> None:
    if len(str(path)) > MAX_UNIX_PATH:
        raise KubeletError(f"socket path {path} is longer than {MAX_UNIX_PATH} bytes")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KubeletError(f"cannot use directory {path.parent}: {e.strerror or e}") from e
    path.unlink(missing_ok=True)
    if server.add_insecure_port(f"unix://{path}") == 0:
        raise KubeletError(f"cannot listen on {path}")


class DraPluginServer:
    """Both gRPC servers of the driver; `start()` binds them, `stop()` removes the sockets."""

    def __init__(
        self,
        sockets: DraSockets,
        prepare: Prepare,
        unprepare: Unprepare,
        health: HealthBoard,
        on_registered: Callable[[], None] | None = None,
    ) -> None:
        self.sockets = sockets
        self.health = health
        self.registration = RegistrationServicer(
            sockets.driver, str(sockets.dra_socket), on_registered
        )
        self._prepare, self._unprepare = prepare, unprepare
        self._stopping = threading.Event()
        self._servers: list[grpc.Server] = []

    def start(self) -> None:
        pool = futures.ThreadPoolExecutor(max_workers=self.sockets.max_workers)
        dra = grpc.server(pool)
        dra_grpc.add_DRAPluginServicer_to_server(  # type: ignore[no-untyped-call]
            DraServicer(self._prepare, self._unprepare), dra
        )
        health_grpc.add_DRAResourceHealthServicer_to_server(  # type: ignore[no-untyped-call]
            HealthServicer(self.health, self._stopping), dra
        )
        _listen(dra, self.sockets.dra_socket)
        dra.start()
        self._servers.append(dra)
        # Registration last: the kubelet connects to the DRA socket as soon as it sees this one.
        reg = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        reg_grpc.add_RegistrationServicer_to_server(self.registration, reg)  # type: ignore[no-untyped-call]
        _listen(reg, self.sockets.registration_socket)
        reg.start()
        self._servers.append(reg)
        log.info(
            "%s: serving %s on %s, registration on %s",
            self.sockets.driver,
            DRA_SERVICE,
            self.sockets.dra_socket,
            self.sockets.registration_socket,
        )

    def stop(self, grace_s: float = 2.0) -> None:
        self._stopping.set()
        self.health.wake()
        for server in reversed(self._servers):
            server.stop(grace_s).wait(grace_s + 1.0)
        self._servers.clear()
        for path in (self.sockets.registration_socket, self.sockets.dra_socket):
            path.unlink(missing_ok=True)
