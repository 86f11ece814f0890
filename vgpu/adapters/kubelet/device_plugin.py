"""Kubelet device-plugin gRPC server: one `DevicePlugin` service per resource, on its own socket.

This module translates only: device lists (`vgpu.node.devices.DeviceEntry`) become
`ListAndWatchResponse`s, and GetPreferredAllocation / Allocate are answered by an injected
`AllocationPolicy`. Registration and re-registration after kubelet restarts live in
`vgpu.adapters.kubelet.registration`.

Concurrency: the sync grpcio server; every open ListAndWatch stream holds one worker thread
and waits on a `DeviceBoard` condition, so a health change reaches the kubelet at once.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from vgpu.adapters._proto.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from vgpu.core.errors import VgpuError
from vgpu.node.allocation import AllocationPolicy
from vgpu.node.devices import DeviceEntry
from vgpu.node.driver_limits import PreStartRefused
from vgpu.node.grants import Refusal

log = logging.getLogger(__name__)

API_VERSION = "v1beta1"
DEFAULT_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
MAX_UNIX_PATH = 107
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"

PreStart = Callable[[str, Sequence[str]], None]
"""Called with (resource, device IDs) before each container start; raises PreStartRefused to
fail the start (`vgpu.agent.driver_limits.DriverLimitHook`)."""


class KubeletError(VgpuError):
    """Talking to the kubelet failed (bad socket path, registration refused, timeout)."""


@dataclass(frozen=True, slots=True)
class PluginOptions:
    plugin_dir: Path = DEFAULT_PLUGIN_DIR
    kubelet_socket: str = "kubelet.sock"
    poll_interval_s: float = 0.2
    register_timeout_s: float = 5.0
    stop_grace_s: float = 2.0
    max_workers: int = 8
    pre_start: PreStart | None = None  # asks the kubelet for PreStartContainer when set

    @property
    def kubelet_socket_path(self) -> Path:
        return self.plugin_dir / self.kubelet_socket


class DeviceBoard:
    """The current device list of one resource; a new version wakes every ListAndWatch stream."""

    def __init__(self, devices: Sequence[DeviceEntry] = ()) -> None:
        self._cond = threading.Condition()
        self._devices = tuple(devices)
        self._version = 0

    def publish(self, devices: Sequence[DeviceEntry]) -> bool:
        """Replace the list; returns False (and wakes nobody) when nothing changed."""
        with self._cond:
            if tuple(devices) == self._devices:
                return False
            self._devices = tuple(devices)
            self._version += 1
            self._cond.notify_all()
            return True

    def republish(self) -> None:
        """Send the same list again as a new version (see `NodeDevicePlugins.republish`)."""
        with self._cond:
            self._version += 1
            self._cond.notify_all()

    def snapshot(self) -> tuple[int, tuple[DeviceEntry, ...]]:
        with self._cond:
            return self._version, self._devices

    def wait_newer(self, version: int, timeout_s: float) -> tuple[int, tuple[DeviceEntry, ...]]:
        """Wait up to `timeout_s` for a version newer than `version`; returns the current one."""
        with self._cond:
            self._cond.wait_for(lambda: self._version != version, timeout_s)
            return self._version, self._devices

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


def to_proto_devices(devices: Sequence[DeviceEntry]) -> api_pb2.ListAndWatchResponse:
    return api_pb2.ListAndWatchResponse(
        devices=[
            api_pb2.Device(
                ID=d.id,
                health=HEALTHY if d.healthy else UNHEALTHY,
                topology=None
                if d.numa_node is None
                else api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=d.numa_node)]),
            )
            for d in devices
        ]
    )


def plugin_options(pre_start: bool = False) -> api_pb2.DevicePluginOptions:
    return api_pb2.DevicePluginOptions(
        pre_start_required=pre_start, get_preferred_allocation_available=True
    )


class DevicePluginServicer(api_pb2_grpc.DevicePluginServicer):
    """The DevicePlugin service for one resource."""

    def __init__(
        self,
        resource: str,
        board: DeviceBoard,
        policy: AllocationPolicy,
        stopping: threading.Event,
        pre_start: PreStart | None = None,
    ) -> None:
        self._resource = resource
        self._board = board
        self._policy = policy
        self._stopping = stopping
        self._pre_start = pre_start

    def GetDevicePluginOptions(
        self, request: api_pb2.Empty, context: grpc.ServicerContext
    ) -> api_pb2.DevicePluginOptions:
        return plugin_options(self._pre_start is not None)

    def ListAndWatch(
        self, request: api_pb2.Empty, context: grpc.ServicerContext
    ) -> Iterator[api_pb2.ListAndWatchResponse]:
        version, devices = self._board.snapshot()
        log.info("%s: ListAndWatch opened, sending %d devices", self._resource, len(devices))
        yield to_proto_devices(devices)
        while context.is_active() and not self._stopping.is_set():
            newer, devices = self._board.wait_newer(version, 0.5)
            if newer != version and not self._stopping.is_set():
                version = newer
                yield to_proto_devices(devices)
        log.info("%s: ListAndWatch closed", self._resource)

    def GetPreferredAllocation(
        self, request: api_pb2.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> api_pb2.PreferredAllocationResponse:
        responses = []
        for req in request.container_requests:
            try:
                ids = self._policy.preferred(
                    self._resource,
                    list(req.available_deviceIDs),
                    list(req.must_include_deviceIDs),
                    req.allocation_size,
                )
            except ValueError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._resource}: {e}")
            responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(
        self, request: api_pb2.AllocateRequest, context: grpc.ServicerContext
    ) -> api_pb2.AllocateResponse:
        ids = [list(req.devices_ids) for req in request.container_requests]
        result = self._policy.allocate(self._resource, ids)
        if isinstance(result, Refusal):
            log.warning("%s: Allocate refused: %s", self._resource, result.reason)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, result.reason)
        return api_pb2.AllocateResponse(
            container_responses=[
                api_pb2.ContainerAllocateResponse(
                    envs=dict(g.envs),
                    annotations=dict(g.annotations),
                    mounts=[
                        api_pb2.Mount(
                            container_path=m.container_path,
                            host_path=m.host_path,
                            read_only=m.read_only,
                        )
                        for m in g.mounts
                    ],
                    cdi_devices=[api_pb2.CDIDevice(name=name) for name in g.cdi_devices],
                )
                for g in result
            ]
        )

    def PreStartContainer(
        self, request: api_pb2.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> api_pb2.PreStartContainerResponse:
        """An error here fails the container's start; the kubelet shows the message. The kubelet
        waits at most 30 s for the answer (k8s.io/kubelet `pkg/apis/deviceplugin/v1beta1`,
        `KubeletPreStartContainerRPCTimeoutInSecs`), so how long it took is logged."""
        if self._pre_start is not None:
            started = time.perf_counter()
            try:
                self._pre_start(self._resource, list(request.devices_ids))
                took_ms = 1000 * (time.perf_counter() - started)
                log.info("%s: PreStartContainer answered in %.1f ms", self._resource, took_ms)
            except PreStartRefused as e:
                log.warning("%s: PreStartContainer refused: %s", self._resource, e)
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
            except Exception as e:
                log.exception("%s: PreStartContainer failed", self._resource)
                context.abort(grpc.StatusCode.INTERNAL, f"{self._resource}: PreStart failed: {e}")
        return api_pb2.PreStartContainerResponse()


class ResourcePlugin:
    """Serves one resource on a fresh socket in the plugin dir and registers it with the kubelet.

    Each `serve()` uses a new socket file name, so a late-closing stream of a previous
    generation can never be confused with the current one by the kubelet.
    """

    def __init__(
        self, resource: str, board: DeviceBoard, policy: AllocationPolicy, options: PluginOptions
    ) -> None:
        self.resource = resource
        self.board = board
        self._policy = policy
        self._options = options
        self._server: grpc.Server | None = None
        self._stopping = threading.Event()
        self._socket: Path | None = None
        self._stem = "".join(c if c.isalnum() or c in "._" else "-" for c in resource)

    @property
    def socket_path(self) -> Path | None:
        return self._socket

    def socket_present(self) -> bool:
        return self._socket is not None and self._socket.is_socket()

    def serve(self) -> Path:
        """(Re)start the gRPC server on a fresh socket; stops the previous generation first."""
        self.stop()
        path = self._options.plugin_dir / f"{self._stem}-{secrets.token_hex(3)}.sock"
        if len(str(path)) > MAX_UNIX_PATH:
            raise KubeletError(f"plugin socket path {path} is longer than {MAX_UNIX_PATH} bytes")
        try:
            self._options.plugin_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise KubeletError(
                f"cannot use device-plugin directory {self._options.plugin_dir}: {e.strerror or e}"
            ) from e
        path.unlink(missing_ok=True)
        self._stopping = threading.Event()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._options.max_workers))
        servicer = DevicePluginServicer(
            self.resource, self.board, self._policy, self._stopping, self._options.pre_start
        )
        api_pb2_grpc.add_DevicePluginServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
        if server.add_insecure_port(f"unix://{path}") == 0:
            raise KubeletError(f"{self.resource}: cannot listen on {path}")
        server.start()
        self._server, self._socket = server, path
        log.debug("%s: serving on %s", self.resource, path)
        return path

    def register(self) -> None:
        """Register the current socket with the kubelet; raises KubeletError on failure."""
        if self._socket is None:
            raise KubeletError(f"{self.resource}: register() before serve()")
        request = api_pb2.RegisterRequest(
            version=API_VERSION,
            endpoint=self._socket.name,
            resource_name=self.resource,
            options=plugin_options(self._options.pre_start is not None),
        )
        target = f"unix://{self._options.kubelet_socket_path}"
        timeout = self._options.register_timeout_s
        try:
            with grpc.insecure_channel(target) as channel:
                grpc.channel_ready_future(channel).result(timeout=timeout)
                stub = api_pb2_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
                stub.Register(request, timeout=timeout)
        except (grpc.RpcError, grpc.FutureTimeoutError) as e:
            detail = e.details() if isinstance(e, grpc.RpcError) else "kubelet not reachable"
            raise KubeletError(f"{self.resource}: registration failed: {detail}") from e
        log.debug("%s: registered endpoint %s", self.resource, self._socket.name)

    def stop(self, grace_s: float | None = None) -> None:
        """Stop serving: end the ListAndWatch streams, stop the server, remove the socket."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        self.board.wake()
        grace = self._options.stop_grace_s if grace_s is None else grace_s
        server.stop(grace).wait(grace + 1.0)
        if self._socket is not None:
            self._socket.unlink(missing_ok=True)
