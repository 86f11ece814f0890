"""Inventory annotation: round trip, strict validation, change detection."""

from __future__ import annotations

import json

import pytest

from vgpu.adapters.fakegpu import parse_spec
from vgpu.api.inventory import InventoryError, encode_inventory, parse_inventory
from vgpu.api.resources import ResourceNames
from vgpu.node.inventory import annotation_patch, build_inventory


def test_round_trip_and_shape() -> None:
    spec = parse_spec("2xA100-SXM4-40GB", numa_nodes=2)
    inv = build_inventory(spec, unhealthy={spec.gpus[1].uuid}, memory_unit_mib=512)
    text = encode_inventory(inv)
    doc = json.loads(text)
    assert doc["version"] == 1 and doc["memoryUnitMiB"] == 512
    assert doc["gpus"][1] == {
        "uuid": spec.gpus[1].uuid,
        "index": 1,
        "model": "NVIDIA A100-SXM4-40GB",
        "memoryMiB": 40960,
        "cores": 100,
        "healthy": False,
        "numa": 1,
        "nvlinkPeers": [spec.gpus[0].uuid],
    }
    assert parse_inventory(text) == inv
    assert inv.memory_units(inv.gpus[0]) == 80
    assert ResourceNames().inventory == "vgpu.io/gpu-inventory"


GOOD_GPU = {
    "uuid": "GPU-a",
    "index": 0,
    "model": "T4",
    "memoryMiB": 15360,
    "cores": 100,
    "healthy": True,
    "numa": None,
    "nvlinkPeers": [],
}


def doc_with(**gpu: object) -> str:
    return json.dumps({"version": 1, "memoryUnitMiB": 256, "gpus": [{**GOOD_GPU, **gpu}]})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"version": 2}', "gpu-inventory.version: unsupported 2"),
        (
            '{"version": 1, "memoryUnitMiB": 0, "gpus": []}',
            "memoryUnitMiB: expected an integer >= 1",
        ),
        ('{"version": 1, "memoryUnitMiB": 256}', "gpu-inventory.gpus: expected a list"),
        (doc_with(uuid=""), "gpus[0].uuid: expected a non-empty string"),
        (doc_with(memoryMiB="16G"), "gpus[0].memoryMiB: expected an integer"),
        (doc_with(healthy="yes"), "gpus[0].healthy: expected true or false"),
        (doc_with(numa=-1), "gpus[0].numa: expected an integer >= 0"),
        (doc_with(nvlinkPeers=[1]), "gpus[0].nvlinkPeers: expected a list of GPU UUIDs"),
        (doc_with(cores=True), "gpus[0].cores: expected an integer"),
        (doc_with(kubeletStale=[]), "gpus[0].kubeletStale: expected an object"),
        (doc_with(kubeletStale={"cores": -1}), "gpus[0].kubeletStale.cores: expected an integer"),
        (doc_with(kubeletStale={"cores": 101, "memoryMiB": 0}), "more than the GPU has"),
    ],
)
def test_parse_errors_name_the_field(text: str, fragment: str) -> None:
    with pytest.raises(InventoryError) as err:
        parse_inventory(text)
    assert fragment in str(err.value)


def test_duplicate_uuid_rejected() -> None:
    text = json.dumps({"version": 1, "memoryUnitMiB": 256, "gpus": [GOOD_GPU, GOOD_GPU]})
    with pytest.raises(InventoryError, match="duplicate uuid"):
        parse_inventory(text)


def test_annotation_patch_only_when_meaning_changes() -> None:
    spec = parse_spec("1xT4")
    inv = build_inventory(spec)
    assert annotation_patch(None, inv) == encode_inventory(inv)
    pretty = json.dumps(json.loads(encode_inventory(inv)), indent=2)
    assert annotation_patch(pretty, inv) is None
    assert annotation_patch("garbage", inv) == encode_inventory(inv)
    sick = build_inventory(spec, unhealthy={spec.gpus[0].uuid})
    assert annotation_patch(encode_inventory(inv), sick) == encode_inventory(sick)


def test_kubelet_stale_devices_round_trip_and_are_absent_when_zero() -> None:
    """The optional `kubeletStale` field: written only when the kubelet's checkpoint holds devices
    of pods gone from the node, so an inventory without any reads as before (old readers, which
    ignore unknown keys, keep working)."""
    spec = parse_spec("2xT4")
    uuid = spec.gpus[1].uuid
    stale = build_inventory(spec, stale={uuid: (30, 2560)})
    doc = json.loads(encode_inventory(stale))
    assert "kubeletStale" not in doc["gpus"][0]
    assert doc["gpus"][1]["kubeletStale"] == {"cores": 30, "memoryMiB": 2560}
    assert parse_inventory(encode_inventory(stale)) == stale
    assert (stale.gpus[1].stale_cores, stale.gpus[1].stale_memory_mib) == (30, 2560)
    plain = build_inventory(spec)
    assert annotation_patch(encode_inventory(stale), plain) == encode_inventory(plain)
    assert "kubeletStale" not in encode_inventory(plain)
