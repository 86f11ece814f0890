"""Client of the kubelet pod-resources API v1: which device IDs each running container holds.

The kubelet is the node's authority on allocations; the agent rebuilds its admitted set from
`List` at start and periodically (docs/handshake.md, reconciliation). Only our two resources are
returned, as `HeldDevices`. The socket is dialled per call (the kubelet replaces it when it
restarts, so a long-lived channel would point at a dead inode). gRPC failures become
`PodResourcesError`.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from vgpu.adapters._proto.podresources.v1 import api_pb2, api_pb2_grpc
from vgpu.core.errors import VgpuError
from vgpu.core.ids import pod_key
from vgpu.node.devices import ResourceNames, UnitKind
from vgpu.node.handoff.admissions import HeldDevices

DEFAULT_POD_RESOURCES_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")


class PodResourcesError(VgpuError):
    """The kubelet pod-resources API could not be read."""


class PodResourcesClient:
    def __init__(
        self,
        socket: Path = DEFAULT_POD_RESOURCES_SOCKET,
        *,
        names: ResourceNames | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.socket = socket
        self._names = names or ResourceNames()
        self._timeout = timeout_s

    def held(self) -> list[HeldDevices]:
        """Every (pod, container, resource) holding devices of our resources."""
        if not self.socket.is_socket():
            raise PodResourcesError(f"pod-resources socket {self.socket} does not exist")
        try:
            with grpc.insecure_channel(f"unix://{self.socket}") as channel:
                stub = api_pb2_grpc.PodResourcesListerStub(channel)  # type: ignore[no-untyped-call]
                reply = stub.List(api_pb2.ListPodResourcesRequest(), timeout=self._timeout)
        except grpc.RpcError as e:
            raise PodResourcesError(
                f"pod-resources List on {self.socket} failed: {e.code().name}: {e.details()}"
            ) from e
        return self._holdings(reply)

    def _holdings(self, reply: api_pb2.ListPodResourcesResponse) -> list[HeldDevices]:
        """One holding per (pod, container, resource): the kubelet lists one `ContainerDevices`
        per device ID, and per NUMA node of it (pkg/kubelet/cm/container_manager.go
        `containerDevicesFromResourceDeviceInstances`), so the IDs are gathered, each once."""
        out = []
        for pod in reply.pod_resources:
            key = pod_key(pod.namespace, pod.name)
            for container in pod.containers:
                ids: dict[UnitKind, dict[str, None]] = {}
                for devices in container.devices:
                    try:
                        kind = self._names.kind_of(devices.resource_name)
                    except ValueError:
                        continue
                    ids.setdefault(kind, {}).update(dict.fromkeys(devices.device_ids))
                out += [HeldDevices(key, container.name, k, tuple(i)) for k, i in ids.items() if i]
        return out
