"""The pod-resources stand-in answers List / Get / GetAllocatableResources over a unix socket."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tests.kubelet_standin.podresources import FakePodResources
from vgpu.adapters._proto.podresources.v1 import api_pb2, api_pb2_grpc


def test_list_get_allocatable(sockdir: Path) -> None:
    server = FakePodResources(sockdir / "pod-resources" / "kubelet.sock")
    devices = api_pb2.ContainerDevices(resource_name="vgpu.io/cores", device_ids=["GPU-a::c0"])
    server.pods = [
        api_pb2.PodResources(
            name="p1",
            namespace="ns",
            containers=[api_pb2.ContainerResources(name="c", devices=[devices])],
        )
    ]
    server.allocatable = api_pb2.AllocatableResourcesResponse(devices=[devices])
    server.start()
    try:
        with grpc.insecure_channel(f"unix://{server.socket}") as channel:
            stub = api_pb2_grpc.PodResourcesListerStub(channel)  # type: ignore[no-untyped-call]
            listed = stub.List(api_pb2.ListPodResourcesRequest(), timeout=5)
            assert listed.pod_resources[0].containers[0].devices[0].device_ids == ["GPU-a::c0"]
            got = stub.Get(api_pb2.GetPodResourcesRequest(pod_name="p1", pod_namespace="ns"))
            assert got.pod_resources.name == "p1"
            alloc = stub.GetAllocatableResources(api_pb2.AllocatableResourcesRequest())
            assert alloc.devices[0].resource_name == "vgpu.io/cores"
            with pytest.raises(grpc.RpcError) as err:
                stub.Get(api_pb2.GetPodResourcesRequest(pod_name="nope", pod_namespace="ns"))
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        server.stop()
