"""`PodResourcesClient.held` over real gRPC, against `List` replies shaped as the kubelet shapes
them: one `ContainerDevices` per device ID without topology, and one per device per NUMA node
with it (pkg/kubelet/cm/container_manager.go `containerDevicesFromResourceDeviceInstances`).
What a container holds of a resource is the union of its entries."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kubelet_standin.podresources import FakePodResources
from vgpu.adapters._proto.podresources.v1 import api_pb2
from vgpu.adapters.kubelet.pod_resources import PodResourcesClient
from vgpu.node.devices import UnitKind

CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"


Entry = tuple[str, list[str], list[int]]


def _container(name: str, entries: list[Entry]) -> api_pb2.ContainerResources:
    """entries: (resource, device IDs, NUMA nodes) per `ContainerDevices`."""
    devices = [
        api_pb2.ContainerDevices(
            resource_name=resource,
            device_ids=ids,
            topology=api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n) for n in numa])
            if numa
            else None,
        )
        for resource, ids, numa in entries
    ]
    return api_pb2.ContainerResources(name=name, devices=devices)


def _held(
    sockdir: Path, containers: list[api_pb2.ContainerResources]
) -> dict[tuple[str, UnitKind], tuple[str, ...]]:
    server = FakePodResources(sockdir / "pod-resources" / "kubelet.sock")
    server.pods = [api_pb2.PodResources(name="p", namespace="ns", containers=containers)]
    server.start()
    try:
        held = PodResourcesClient(server.socket).held()
    finally:
        server.stop()
    assert len({(h.pod, h.container, h.kind) for h in held}) == len(held), "one per resource"
    return {(h.container, h.kind): h.ids for h in held}


def test_one_entry_per_device_is_one_holding_per_container_and_resource(sockdir: Path) -> None:
    cores = [f"GPU-a::c{i}" for i in range(30)]
    none: list[int] = []
    entries: list[Entry] = [(CORES, [i], none) for i in cores] + [(MEMORY, ["GPU-a::m0"], none)]
    entries += [("example.com/other", ["x"], none)]
    numa = [(CORES, [i], [0, 1]) for i in ("GPU-b::c0", "GPU-b::c1")]  # one per NUMA node
    held = _held(sockdir, [_container("main", entries), _container("side", numa)])
    assert held == {
        ("main", UnitKind.CORES): tuple(cores),
        ("main", UnitKind.MEMORY): ("GPU-a::m0",),
        ("side", UnitKind.CORES): ("GPU-b::c0", "GPU-b::c1"),
    }


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.integers(0, 2))
def test_any_split_into_entries_gives_the_same_holding(
    sockdir: Path, sizes: list[int], copies: int
) -> None:
    """However the IDs are split across entries (and repeated, as for devices on two NUMA
    nodes), the holding is every ID once, in the kubelet's order."""
    ids = [f"GPU-a::c{i}" for i in range(sum(sizes))]
    entries: list[Entry] = []
    at = 0
    for size in sizes:
        entries += [(CORES, ids[at : at + size], [])] * (1 + copies)
        at += size
    assert _held(sockdir, [_container("main", entries)]) == {("main", UnitKind.CORES): tuple(ids)}
