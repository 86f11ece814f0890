"""Per-container directories: found again in the kubelet's checkpoint (its `AllocResp` is the
answer's protobuf bytes, base64 in the JSON: pkg/kubelet/cm/devicemanager/checkpoint), collected
once the checkpoint no longer names them and the grace has passed, never without a checkpoint."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from vgpu.adapters._proto.deviceplugin.v1beta1 import api_pb2
from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.node.container_dirs import DirectoryLimit, referenced_ids


def checkpoint(dirs: ContainerDirs, *cids: str) -> str:
    """A checkpoint as the kubelet writes it, one entry per container directory."""
    entries = []
    for cid in cids:
        resp = api_pb2.ContainerAllocateResponse(
            envs={"LD_PRELOAD": "/usr/local/vgpu/libvgpu-core.so"},
            mounts=[
                api_pb2.Mount(container_path="/run/vgpu", host_path=str(dirs.limits_dir(cid))),
                api_pb2.Mount(
                    container_path="/run/vgpu-shared", host_path=str(dirs.shared_dir(cid))
                ),
            ],
        )
        entries.append(
            {
                "PodUID": "u",
                "ContainerName": "c",
                "ResourceName": "vgpu.io/cores",
                "DeviceIDs": {"-1": ["GPU-x::c0"]},
                "AllocResp": base64.b64encode(resp.SerializeToString()).decode(),
            }
        )
    return json.dumps(
        {"Data": {"PodDeviceEntries": entries, "RegisteredDevices": {}}, "Checksum": 1}
    )


def age(dirs: ContainerDirs, cid: str, seconds: float) -> None:
    path = dirs.root / cid
    t = path.stat().st_mtime - seconds
    os.utime(path, (t, t))


def test_the_checkpoint_names_the_directories_of_live_answers(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    a, b = dirs.create(None), dirs.create(None)
    assert referenced_ids(checkpoint(dirs, a)) == frozenset({a})
    assert referenced_ids(checkpoint(dirs, a, b)) == frozenset({a, b})
    assert referenced_ids("not json") is None and referenced_ids('{"Data": 1}') is None


def test_collect_removes_only_unnamed_directories_older_than_the_grace(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path, grace_s=60)
    live, young, old = dirs.create(None), dirs.create(None), dirs.create(None)
    for cid in (live, old):
        age(dirs, cid, 120)
    (dirs.root / "not-ours").mkdir()
    refs = referenced_ids(checkpoint(dirs, live))
    assert refs is not None
    assert dirs.collect(refs) == [old]
    assert sorted(dirs.ids()) == sorted([live, young]) and (dirs.root / "not-ours").is_dir()


def test_collecting_frees_room_under_the_bound(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path, max_dirs=2, grace_s=0)
    for _ in range(2):
        age(dirs, dirs.create(None), 5)
    with pytest.raises(DirectoryLimit, match="bound is 2"):
        dirs.create(None)
    dirs.collect(frozenset())
    assert dirs.create(None)
