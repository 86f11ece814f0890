"""The ResourceSlice the DRA driver publishes (pure)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.adapters.fakegpu import parse_spec
from vgpu.api.dra import device_index, device_name
from vgpu.dra.slices import build_slice, nvlink_islands, same_devices, slice_name
from vgpu.node.model import GpuInfo

INV = parse_spec("2xA100-SXM4-80GB,1xT4", seed="n1", numa_nodes=2)


def test_one_shareable_device_per_gpu_with_attributes_and_capacities() -> None:
    s = build_slice("n1", INV, memory_unit_mib=256, node_uid="u-1")
    assert s["apiVersion"] == "resource.k8s.io/v1" and s["kind"] == "ResourceSlice"
    spec = s["spec"]
    assert spec["driver"] == "vgpu.io" and spec["nodeName"] == "n1"
    assert spec["pool"] == {"name": "n1", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    a100, t4 = spec["devices"][0], spec["devices"][2]
    assert a100["allowMultipleAllocations"] is True
    attrs = a100["attributes"]
    assert attrs["uuid"] == {"string": INV.gpus[0].uuid}
    assert attrs["model"]["string"].startswith("NVIDIA A100")
    assert attrs["computeCapability"] == {"version": "8.0.0"}
    assert attrs["numaNode"] == {"int": 0} and t4["attributes"]["numaNode"] == {"int": 1}
    assert attrs["pciBusID"]["string"] == INV.gpus[0].pci_bus_id
    assert attrs["driverVersion"] == {"string": INV.driver_version}
    assert attrs["memoryMiB"] == {"int": INV.gpus[0].memory_mib}
    # The two SXM A100s are one NVLink island, the T4 an island of its own.
    assert attrs["nvlinkIsland"] == spec["devices"][1]["attributes"]["nvlinkIsland"] == {"int": 0}
    assert t4["attributes"]["nvlinkIsland"] == {"int": 2}
    cores = a100["capacity"]["cores"]
    assert cores == {
        "value": "100",
        "requestPolicy": {"default": "100", "validRange": {"min": "1", "max": "100", "step": "1"}},
    }
    mem = t4["capacity"]["memory"]
    assert mem["value"] == "15360Mi" and mem["requestPolicy"]["default"] == "15360Mi"
    assert mem["requestPolicy"]["validRange"]["step"] == "256Mi"
    owner = s["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Node" and owner["uid"] == "u-1"
    assert s["metadata"]["name"] == slice_name("n1") == "n1-vgpu-io"


def test_memory_capacity_is_whole_units() -> None:
    inv = parse_spec("1xOdd:1000", seed="n1")
    dev = build_slice("n1", inv, memory_unit_mib=256)["spec"]["devices"][0]
    assert dev["capacity"]["memory"]["value"] == "768Mi"


def test_unhealthy_gpus_are_withdrawn_and_restored() -> None:
    healthy = build_slice("n1", INV, memory_unit_mib=256)
    sick = build_slice("n1", INV, memory_unit_mib=256, unhealthy={INV.gpus[1].uuid})
    assert [d["name"] for d in sick["spec"]["devices"]] == ["gpu-0", "gpu-2"]
    assert not same_devices(healthy, sick)
    again = build_slice("n1", INV, memory_unit_mib=256, generation=7)
    assert same_devices(healthy, again)


def test_fullest_first_order() -> None:
    used = {INV.gpus[2].uuid: 70, INV.gpus[1].uuid: 20}
    s = build_slice("n1", INV, memory_unit_mib=256, used_cores=used)
    assert [d["name"] for d in s["spec"]["devices"]] == ["gpu-2", "gpu-1", "gpu-0"]


def test_device_names_round_trip() -> None:
    assert device_index(device_name(12)) == 12
    for bad in ("gpu-", "gpu-x", "mig-1", "gpu-123456", "1"):
        assert device_index(bad) is None


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda n: st.tuples(
            st.just(n), st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)))
        )
    )
)
def test_islands_are_connected_components(case: tuple[int, set[tuple[int, int]]]) -> None:
    n, links = case
    peers: dict[int, set[str]] = {i: set() for i in range(n)}
    for a, b in links:
        if a != b:
            peers[a].add(f"u{b}")
            peers[b].add(f"u{a}")
    gpus = [GpuInfo(f"u{i}", i, "X", 1024, nvlink_peers=tuple(peers[i])) for i in range(n)]
    island = nvlink_islands(gpus)
    for a, b in links:  # linked GPUs share an island ...
        assert island[f"u{a}"] == island[f"u{b}"]
    for i in range(n):  # ... named by its lowest index, which is in it
        assert island[f"u{i}"] <= i and island[f"u{island[f'u{i}']}"] == island[f"u{i}"]
