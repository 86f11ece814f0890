"""The checked-in generated gRPC code must match what hack/update-proto.sh produces."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

import grpc_tools

REPO = Path(__file__).resolve().parents[2]
GENERATED = Path("vgpu/adapters/_proto")


def _relative_files(root: Path) -> set[Path]:
    return {
        p.relative_to(root) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_code_matches_protos(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(
        ["bash", str(REPO / "hack/update-proto.sh"), str(tmp_path)], check=True, env=env, cwd=REPO
    )
    fresh, checked_in = tmp_path / GENERATED, REPO / GENERATED
    assert _relative_files(fresh) == _relative_files(checked_in)
    differing = [
        str(rel)
        for rel in sorted(_relative_files(fresh))
        if not filecmp.cmp(fresh / rel, checked_in / rel, shallow=False)
    ]
    assert not differing, (
        f"generated code is stale: {differing}; run hack/update-proto.sh "
        f"(grpcio-tools {getattr(grpc_tools, '__version__', '?')} must match the pinned version)"
    )


def test_both_protos_load_in_one_process() -> None:
    from vgpu.adapters._proto.deviceplugin.v1beta1 import api_pb2 as dp
    from vgpu.adapters._proto.podresources.v1 import api_pb2 as pr

    assert dp.DESCRIPTOR.package == "v1beta1"
    assert pr.DESCRIPTOR.package == "v1"


def test_wire_encoding_matches_upstream_field_numbers() -> None:
    from vgpu.adapters._proto.deviceplugin.v1beta1 import api_pb2 as dp

    assert dp.ContainerAllocateRequest(devices_ids=["x"]).SerializeToString() == b"\n\x01x"
    preferred = dp.ContainerPreferredAllocationRequest.DESCRIPTOR.fields_by_name
    assert {name: f.number for name, f in preferred.items()} == {
        "available_deviceIDs": 1,
        "must_include_deviceIDs": 2,
        "allocation_size": 3,
    }
    assert dp.ContainerAllocateResponse.DESCRIPTOR.fields_by_name["cdi_devices"].number == 5
