"""A stand-in kubelet for device-plugin tests, modelled on what the real device manager does.

It serves `Registration` on `<dir>/kubelet.sock`; on Register it checks the version, dials
`<dir>/<endpoint>` back, reads `GetDevicePluginOptions` and consumes `ListAndWatch` in a
thread (a broken stream marks all devices unhealthy, as the kubelet does). `allocate()` picks
devices like the kubelet: healthy and not yet allocated, via GetPreferredAllocation when the
plugin offers it (unless told to ignore it), falling back to its own choice when the answer is
unusable. `restart()` wipes the socket files of the directory and creates a new kubelet.sock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from vgpu.adapters._proto.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc


@dataclass(frozen=True)
class Registration:
    resource: str
    endpoint: str
    version: str
    options: Any


@dataclass
class PluginConnection:
    resource: str
    endpoint: str
    channel: grpc.Channel
    stub: Any
    options: Any
    devices: dict[str, str] = field(default_factory=dict)  # ID -> health
    numa: dict[str, list[int]] = field(default_factory=dict)
    updates: int = 0
    stream_open: bool = True


class FakeKubelet(api_pb2_grpc.RegistrationServicer):
    def __init__(self, plugin_dir: Path, *, fail_registrations: int = 0) -> None:
        self.dir = plugin_dir
        self.socket = plugin_dir / "kubelet.sock"
        self.registrations: list[Registration] = []
        self.fail_registrations = fail_registrations
        self.allocated: dict[str, set[str]] = {}
        self._plugins: dict[str, PluginConnection] = {}
        self._cond = threading.Condition()
        self._server: grpc.Server | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_pb2_grpc.add_RegistrationServicer_to_server(self, server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait(5)
            self._server = None
        with self._cond:
            plugins, self._plugins = list(self._plugins.values()), {}
        for conn in plugins:
            conn.channel.close()

    def restart(self) -> None:
        """Like a kubelet restart: drop plugins, delete every socket file, new kubelet.sock."""
        self.stop()
        for path in self.dir.iterdir():
            if path.is_socket():
                path.unlink()
        self.start()

    # -- Registration service ----------------------------------------------------------------

    def Register(self, request: Any, context: grpc.ServicerContext) -> Any:
        if self.fail_registrations > 0:
            self.fail_registrations -= 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "stand-in told to refuse")
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad version {request.version!r}")
        if "/" not in request.resource_name or request.resource_name.startswith("kubernetes.io/"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not an extended resource name")
        channel = grpc.insecure_channel(f"unix://{self.dir / request.endpoint}")
        try:
            grpc.channel_ready_future(channel).result(timeout=10)
        except grpc.FutureTimeoutError:
            channel.close()
            context.abort(grpc.StatusCode.UNAVAILABLE, f"cannot dial {request.endpoint}")
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        options = stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5)
        conn = PluginConnection(request.resource_name, request.endpoint, channel, stub, options)
        with self._cond:
            old = self._plugins.pop(request.resource_name, None)
            self._plugins[request.resource_name] = conn
            self.registrations.append(
                Registration(
                    request.resource_name, request.endpoint, request.version, request.options
                )
            )
            self._cond.notify_all()
        if old is not None:
            old.channel.close()
        threading.Thread(target=self._watch, args=(conn,), daemon=True).start()
        return api_pb2.Empty()

    def _watch(self, conn: PluginConnection) -> None:
        try:
            for response in conn.stub.ListAndWatch(api_pb2.Empty()):
                with self._cond:
                    conn.devices = {d.ID: d.health for d in response.devices}
                    conn.numa = {d.ID: [n.ID for n in d.topology.nodes] for d in response.devices}
                    conn.updates += 1
                    self._cond.notify_all()
        except (grpc.RpcError, ValueError):  # ValueError: channel already closed
            pass
        with self._cond:
            conn.stream_open = False
            conn.devices = dict.fromkeys(conn.devices, "Unhealthy")
            self._cond.notify_all()

    # -- inspection ----------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def connection(self, resource: str) -> PluginConnection:
        with self._cond:
            return self._plugins[resource]

    def devices(self, resource: str) -> dict[str, str]:
        with self._cond:
            conn = self._plugins.get(resource)
            return dict(conn.devices) if conn else {}

    # -- allocation ----------------------------------------------------------------------------

    def preferred(
        self, resource: str, available: list[str], must: list[str], size: int
    ) -> list[str]:
        request = api_pb2.PreferredAllocationRequest(
            container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                )
            ]
        )
        response = self.connection(resource).stub.GetPreferredAllocation(request, timeout=5)
        return list(response.container_responses[0].deviceIDs)

    def allocate(
        self, resource: str, size: int, *, use_preferred: bool = True
    ) -> tuple[list[str], Any]:
        """Choose `size` free healthy devices like the kubelet, then call Allocate with them."""
        taken = self.allocated.setdefault(resource, set())
        free = sorted(
            i for i, h in self.devices(resource).items() if h == "Healthy" and i not in taken
        )
        if len(free) < size:
            raise RuntimeError(f"only {len(free)} free {resource} devices, need {size}")
        chosen = free[:size]
        conn = self.connection(resource)
        if use_preferred and conn.options.get_preferred_allocation_available:
            answer = self.preferred(resource, free, [], size)
            if len(answer) == size and set(answer) <= set(free):
                chosen = answer
        response = self.allocate_ids(resource, chosen)
        taken.update(chosen)
        return chosen, response

    def allocate_ids(self, resource: str, ids: list[str]) -> Any:
        request = api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids)]
        )
        return self.connection(resource).stub.Allocate(request, timeout=5)
