"""Per-container directories: found again in the kubelet's checkpoint (its `AllocResp` is the
answer's protobuf bytes, base64 in the JSON: pkg/kubelet/cm/devicemanager/checkpoint), collected
once the checkpoint no longer names them (at once when it named them before, else after the
grace), never without a checkpoint; bounded per node, namespace and pod, and shared by a pod's
init containers with equal limits."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.adapters._proto.deviceplugin.v1beta1 import api_pb2
from vgpu.adapters.container_dirs import ContainerDirs, write_limits
from vgpu.node.container_dirs import DirBounds, DirectoryLimit, DirOwner, referenced_ids
from vgpu.node.limits_file import DeviceLimit


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


def test_a_directory_older_than_one_the_checkpoint_names_goes_before_the_grace(
    tmp_path: Path,
) -> None:
    """The kubelet takes each Allocate answer in before it asks the next: a checkpoint that
    names a later answer's directory but not an earlier one means the earlier container is gone
    (a pod created and deleted between two collects left its directory for the whole grace,
    10 minutes, before). A directory answered after the newest one named may still be on its
    way into the checkpoint, and one this process did not answer (made before a restart) keeps
    the grace."""
    dirs = ContainerDirs(tmp_path, grace_s=600)
    before_restart = dirs.create(None)
    dirs = ContainerDirs(tmp_path, grace_s=600)
    gone, live, newest = dirs.create(None), dirs.create(None), dirs.create(None)
    refs = referenced_ids(checkpoint(dirs, live))
    assert refs is not None
    assert dirs.collect(refs) == [gone]
    assert sorted(dirs.ids()) == sorted([before_restart, live, newest])


def test_collecting_frees_room_under_the_bound(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path, max_dirs=2, grace_s=0)
    for _ in range(2):
        age(dirs, dirs.create(None), 5)
    with pytest.raises(DirectoryLimit, match="bound is 2"):
        dirs.create(None)
    dirs.collect(frozenset())
    assert dirs.create(None)


GPU = "GPU-00000000-0000-0000-0000-000000000001"
LIMITS = [DeviceLimit(GPU, 1 << 30, 30, 30, 30)]


def owner(pod: str = "uid-a", container: str = "c", ns: str = "t", init: bool = False) -> DirOwner:
    return DirOwner(ns, pod, container, shared_init=init)


def test_one_pod_is_bounded_and_its_neighbours_still_get_directories(tmp_path: Path) -> None:
    """Seven pods of one tenant took all 2,048 directories of a node."""
    dirs = ContainerDirs(tmp_path, bounds=DirBounds(namespace=4, pod=2))
    for n in range(2):
        dirs.create(LIMITS, owner("uid-a", f"c{n}"))
    with pytest.raises(DirectoryLimit, match=r"pod UID uid-a in t .*bound is 2 per pod"):
        dirs.create(LIMITS, owner("uid-a", "c2"))
    assert dirs.create(LIMITS, owner("uid-b", "c0"))


def test_one_namespace_is_bounded_and_other_namespaces_still_get_directories(
    tmp_path: Path,
) -> None:
    dirs = ContainerDirs(tmp_path, bounds=DirBounds(namespace=3, pod=2))
    for pod, container in [("uid-a", "c0"), ("uid-a", "c1"), ("uid-b", "c0")]:
        dirs.create(LIMITS, owner(pod, container))
    with pytest.raises(DirectoryLimit, match=r"namespace t .*bound is 3 per namespace"):
        dirs.create(LIMITS, owner("uid-c", "c0"))
    assert dirs.create(LIMITS, owner("uid-c", "c0", ns="other"))


def test_the_bounds_count_the_directories_of_an_earlier_agent(tmp_path: Path) -> None:
    ContainerDirs(tmp_path).create(LIMITS, owner("uid-a", "c0"))
    again = ContainerDirs(tmp_path, bounds=DirBounds(namespace=4, pod=1))
    with pytest.raises(DirectoryLimit, match="per pod"):
        again.create(LIMITS, owner("uid-a", "c1"))


def test_a_pods_init_containers_with_equal_limits_share_one_directory(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path, bounds=DirBounds(namespace=4, pod=2))
    first = dirs.create(LIMITS, owner("uid-a", "i0", init=True))
    assert all(dirs.create(LIMITS, owner("uid-a", f"i{n}", init=True)) == first for n in range(9))
    other = [DeviceLimit(GPU, 1 << 30, 40, 40, 40)]
    assert dirs.create(other, owner("uid-a", "i10", init=True)) != first
    assert dirs.create(LIMITS, owner("uid-b", "i0", init=True)) != first  # another pod's: never
    assert len(list(dirs.ids())) == 3


def test_an_init_directory_is_shared_after_the_elastic_duty_moved_its_allowance(
    tmp_path: Path,
) -> None:
    elastic = [DeviceLimit(GPU, 1 << 30, 30, 60, 30)]
    dirs = ContainerDirs(tmp_path)
    first = dirs.create(elastic, owner("uid-a", "i0", init=True))
    write_limits(dirs.limits_dir(first), [replace(elastic[0], allowance=60)])  # lent
    assert dirs.create(elastic, owner("uid-a", "i1", init=True)) == first
    assert dirs.create(LIMITS, owner("uid-a", "i2", init=True)) != first  # another limit


def test_an_unsure_or_non_init_container_never_shares(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path)
    first = dirs.create(LIMITS, owner("uid-a", "i0", init=True))
    assert dirs.create(LIMITS, owner("uid-a", "i1", init=False)) != first
    assert dirs.create(LIMITS, owner("uid-a", "i1", init=True)) == first


def test_a_directory_the_checkpoint_dropped_is_removed_at_once(tmp_path: Path) -> None:
    dirs = ContainerDirs(tmp_path, grace_s=600)
    dropped, young = dirs.create(LIMITS, owner()), dirs.create(LIMITS, owner(container="d"))
    assert dirs.collect(frozenset({dropped})) == []
    assert dirs.collect(frozenset()) == [dropped]  # named once, now gone: no grace
    assert list(dirs.ids()) == [young]  # never named yet: the grace still covers it


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xyz")), max_size=30))
def test_no_pod_or_namespace_ever_holds_more_than_its_bound(
    asks: list[tuple[str, str]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = ContainerDirs(Path(tmp), bounds=DirBounds(node=8, namespace=4, pod=2))
        made: list[tuple[str, str]] = []
        for n, (pod, ns) in enumerate(asks):
            try:
                dirs.create(LIMITS, owner(f"uid-{ns}-{pod}", f"c{n}", ns=ns))
            except DirectoryLimit:
                continue
            made.append((pod, ns))
        assert len(made) <= 8
        assert all(made.count(p) <= 2 for p in made)
        assert all(sum(1 for _, ns in made if ns == x) <= 4 for x in "xyz")
