"""A stand-in for the kubelet pod-resources v1 service (List / Get / GetAllocatableResources)."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from vgpu.adapters._proto.podresources.v1 import api_pb2, api_pb2_grpc


class FakePodResources(api_pb2_grpc.PodResourcesListerServicer):
    """Serves whatever the test puts in `pods` and `allocatable` on a unix socket."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.pods: list[Any] = []
        self.allocatable: Any = api_pb2.AllocatableResourcesResponse()
        self._server: grpc.Server | None = None

    def start(self) -> None:
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(self, server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait(5)
            self._server = None

    def List(self, request: Any, context: grpc.ServicerContext) -> Any:
        return api_pb2.ListPodResourcesResponse(pod_resources=self.pods)

    def Get(self, request: Any, context: grpc.ServicerContext) -> Any:
        for pod in self.pods:
            if pod.name == request.pod_name and pod.namespace == request.pod_namespace:
                return api_pb2.GetPodResourcesResponse(pod_resources=pod)
        context.abort(
            grpc.StatusCode.NOT_FOUND, f"pod {request.pod_namespace}/{request.pod_name} not found"
        )

    def GetAllocatableResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self.allocatable
