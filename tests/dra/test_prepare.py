"""Preparing an allocated claim: the CDI edits equal the device-plugin grant (pure)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.adapters.fakegpu import parse_spec
from vgpu.dra.prepare import NodeGpus, PreparedClaim, claim_owner, prepare_claim
from vgpu.node.container_dirs import DirOwner
from vgpu.node.grants import GpuLimit, GrantMode, GrantSettings, Refusal, container_grant

INV = parse_spec("4xA100-SXM4-40GB", seed="n1")
NODE = NodeGpus(pool="n1", gpus={g.index: g for g in INV.gpus})


def claim(*results: dict[str, Any], uid: str = "uid-1") -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "c", "uid": uid},
        "status": {"allocation": {"devices": {"results": list(results)}}},
    }


def result(device: str, request: str = "gpu", **consumed: str) -> dict[str, Any]:
    r: dict[str, Any] = {"request": request, "driver": "vgpu.io", "pool": "n1", "device": device}
    if consumed:
        r["consumedCapacity"] = consumed
        r["shareID"] = f"share-{device}"
    return r


def envs(prepared: PreparedClaim) -> dict[str, str]:
    (dev,) = prepared.cdi_spec["devices"]
    return dict(e.split("=", 1) for e in dev["containerEdits"]["env"])


def test_a_share_gets_the_device_plugin_grant() -> None:
    out = prepare_claim(claim(result("gpu-2", cores="30", memory="8Gi")), "uid-1", NODE)
    assert isinstance(out, PreparedClaim)
    gpu = INV.gpus[2]
    expected = container_grant([GpuLimit(gpu.uuid, 30, 8192)], GrantSettings())
    assert not isinstance(expected, Refusal)
    assert envs(out) == dict(expected.envs)
    assert envs(out)["CUDA_VISIBLE_DEVICES"] == gpu.uuid
    (dev,) = out.devices
    assert (dev.pool, dev.device, dev.share_id) == ("n1", "gpu-2", "share-gpu-2")
    assert dev.cdi_ids == ("vgpu.io/claim=uid-1-gpu", f"nvidia.com/gpu={gpu.uuid}")
    assert out.cdi_spec["kind"] == "vgpu.io/claim"


def test_two_whole_gpus_are_one_cdi_device_listed_once() -> None:
    out = prepare_claim(claim(result("gpu-3"), result("gpu-1")), "uid-1", NODE)
    assert isinstance(out, PreparedClaim)
    e = envs(out)
    assert "NVIDIA_VISIBLE_DEVICES" not in e
    assert e["CUDA_VISIBLE_DEVICES"] == f"{INV.gpus[1].uuid},{INV.gpus[3].uuid}"
    assert e["VGPU_CORES"] == "100,100"
    assert e["VGPU_MEMORY_LIMIT_MIB"] == f"{INV.gpus[1].memory_mib},{INV.gpus[3].memory_mib}"
    assert [d.cdi_ids for d in out.devices] == [
        (
            "vgpu.io/claim=uid-1-gpu",
            f"nvidia.com/gpu={INV.gpus[1].uuid}",
            f"nvidia.com/gpu={INV.gpus[3].uuid}",
        ),
        (),
    ]


def test_mps_mode_mounts_the_pipe_directory() -> None:
    node = NodeGpus("n1", NODE.gpus, GrantSettings(GrantMode.MPS, "/run/mps"))
    out = prepare_claim(claim(result("gpu-0", cores="50", memory="4Gi")), "uid-1", node)
    assert isinstance(out, PreparedClaim)
    assert envs(out)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    (dev,) = out.cdi_spec["devices"]
    assert dev["containerEdits"]["mounts"][0]["hostPath"] == "/run/mps"


def test_refusals_say_why() -> None:
    cases = {
        "it was deleted and created again": (claim(result("gpu-0")), "uid-OLD", NODE),
        "no vgpu.io device allocated": ({"metadata": {"uid": "u"}}, "u", NODE),
        "this is 'n1'": (claim({**result("gpu-0"), "pool": "n2"}), "uid-1", NODE),
        "is not a GPU of node n1": (claim(result("gpu-9")), "uid-1", NODE),
        "is unhealthy": (
            claim(result("gpu-0")),
            "uid-1",
            NodeGpus("n1", NODE.gpus, unhealthy={INV.gpus[0].uuid}),
        ),
        "consumedCapacity.cores": (claim(result("gpu-0", cores="1.5")), "uid-1", NODE),
    }
    for expected, (obj, uid, node) in cases.items():
        out = prepare_claim(obj, uid, node)
        assert isinstance(out, Refusal), expected
        assert expected in out.reason, (expected, out.reason)


def test_other_drivers_results_are_ignored() -> None:
    other = {**result("gpu-0"), "driver": "gpu.nvidia.com"}
    out = prepare_claim(claim(other, result("gpu-1", cores="10", memory="1Gi")), "uid-1", NODE)
    assert isinstance(out, PreparedClaim)
    assert [d.device for d in out.devices] == ["gpu-1"]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3), st.integers(1, 100), st.integers(1, 160))
def test_limits_follow_consumed_capacity(index: int, cores: int, units: int) -> None:
    out = prepare_claim(
        claim(result(f"gpu-{index}", cores=str(cores), memory=f"{units * 256}Mi")), "uid-1", NODE
    )
    assert isinstance(out, PreparedClaim)
    e = envs(out)
    assert e["VGPU_CORES"] == str(cores)
    assert int(e["VGPU_MEMORY_LIMIT_MIB"]) == min(units * 256, INV.gpus[index].memory_mib)


@pytest.mark.parametrize("memory", ["0", "1", "255Mi", "41Gi"])
def test_memory_outside_the_slices_range_is_refused_not_capped(memory: str) -> None:
    """The slice offers 256 MiB .. the GPU's memory; a claim whose allocation records less (0
    or 1 byte) or more (beyond the 40 GB GPU) is refused with the field and the bound."""
    out = prepare_claim(claim(result("gpu-1", cores="30", memory=memory)), "uid-1", NODE)
    assert isinstance(out, Refusal)
    assert "consumedCapacity.memory" in out.reason and "reallocate" in out.reason
    assert ("smallest share, 256 MiB" in out.reason) or ("more than the GPU's" in out.reason)


# A CDI device name: letters, digits, '_', '-', '.', ':', starting and ending with a letter or
# digit (cncf-tags/container-device-interface, pkg/parser/parser.go, ValidateDeviceName).
CDI_DEVICE_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?")


def test_a_subrequest_of_first_available_gets_a_valid_cdi_name_and_a_readable_owner() -> None:
    """The allocator records a `firstAvailable` subrequest as `<request>/<subrequest>`
    (resource.k8s.io/v1 `DeviceRequestAllocationResult.request`). A '/' in the CDI device name
    made the claim's spec one the runtime cannot read, and in the directory's owner one no
    restarted driver could read back (only the node's bound then counted it)."""
    out = prepare_claim(
        claim(
            result("gpu-0", "gpu/small", cores="30", memory="8Gi"),
            result("gpu-1", "gpu-small", cores="30", memory="8Gi"),
        ),
        "uid-1",
        NODE,
    )
    assert isinstance(out, PreparedClaim)
    names = [d["name"] for d in out.cdi_spec["devices"]]
    assert all(CDI_DEVICE_NAME.fullmatch(n) for n in names), names
    assert len(set(names)) == 2  # "gpu/small" and "gpu-small" stay apart
    assert out.devices[0].cdi_ids[0] == f"vgpu.io/claim={names[0]}"
    owner = claim_owner(claim(), "gpu/small")
    assert DirOwner.parse(owner.render()) == owner
