"""Process cgroup → (pod UID, container ID) for the layouts kubelets and runtimes produce, and the
container directory that turns that into a pod's container."""

from __future__ import annotations

import pytest

from vgpu.node.cgroup import CgroupOwner, container_id, parse_cgroup, parse_cgroup_path
from vgpu.node.containers import ContainerDirectory, ContainerKey, Unresolved

UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
US = UID.replace("-", "_")
CID = "3b2c" + "a1" * 30
OWNER = CgroupOwner(UID, CID)

V1_CGROUPFS = f"""12:memory:/kubepods/burstable/pod{UID}/{CID}
11:cpu,cpuacct:/kubepods/burstable/pod{UID}/{CID}
1:name=systemd:/kubepods/burstable/pod{UID}/{CID}
"""
V1_SYSTEMD_DOCKER = (
    f"9:devices:/kubepods.slice/kubepods-besteffort.slice/"
    f"kubepods-besteffort-pod{US}.slice/docker-{CID}.scope\n"
)
V2_CONTAINERD = (
    f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{US}.slice/"
    f"cri-containerd-{CID}.scope\n"
)
V2_GUARANTEED_CRIO_CRUN = f"0::/kubepods.slice/kubepods-pod{US}.slice/crio-{CID}.scope/container\n"
V2_CGROUPFS_GUARANTEED = f"0::/kubepods/pod{UID}/{CID}\n"
CONTAINERD_COLON = f"0::/kubepods-besteffort-pod{US}.slice:cri-containerd:{CID}\n"
KIND_NESTED = (
    f"0::/docker/{'9' * 64}/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
    f"kubelet-kubepods-besteffort-pod{US}.slice/cri-containerd-{CID}.scope\n"
)
HYBRID = f"1:name=systemd:/user.slice\n0::/kubepods/besteffort/pod{UID}/{CID}\n"


@pytest.mark.parametrize(
    "text",
    [
        V1_CGROUPFS,
        V1_SYSTEMD_DOCKER,
        V2_CONTAINERD,
        V2_GUARANTEED_CRIO_CRUN,
        V2_CGROUPFS_GUARANTEED,
        CONTAINERD_COLON,
        KIND_NESTED,
        HYBRID,
    ],
    ids=[
        "v1-cgroupfs",
        "v1-systemd-docker",
        "v2-systemd-containerd",
        "v2-crio-crun-nested",
        "v2-cgroupfs-guaranteed",
        "containerd-colon-path",
        "kind-nested",
        "hybrid",
    ],
)
def test_container_processes_are_placed(text: str) -> None:
    assert parse_cgroup(text) == OWNER


@pytest.mark.parametrize(
    "text",
    [
        "0::/system.slice/nvidia-persistenced.service\n",
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        f"0::/kubepods.slice/kubepods-pod{US}.slice/crio-conmon-{CID}.scope\n",  # CRI-O monitor
        f"0::/kubepods.slice/kubepods-pod{US}.slice\n",  # the pod slice itself
        "",
        "garbage without colons\n",
    ],
    ids=["host-service", "user-session", "crio-conmon", "pod-slice", "empty", "garbage"],
)
def test_processes_outside_a_container_are_not_placed(text: str) -> None:
    assert parse_cgroup(text) is None


def test_upper_case_paths_and_status_ids_are_normalised() -> None:
    assert parse_cgroup_path(f"/kubepods/pod{UID.upper()}/{CID.upper()}") == OWNER
    assert container_id(f"containerd://{CID}") == CID
    assert container_id(f"cri-o://{CID}") == container_id(f"docker://{CID}") == CID


def _pod(uid: str, statuses: list[tuple[str, str]], **annotations: str) -> dict[str, object]:
    return {
        "metadata": {"namespace": "ml", "name": "train", "uid": uid, "annotations": annotations},
        "status": {
            "initContainerStatuses": [{"name": "setup", "containerID": ""}],
            "containerStatuses": [{"name": n, "containerID": c} for n, c in statuses],
        },
    }


def test_directory_resolves_known_starting_and_foreign_processes() -> None:
    directory = ContainerDirectory()
    directory.observe(_pod(UID, [("main", f"containerd://{CID}")]))
    assert directory.resolve(OWNER) == ContainerKey("ml", "train", "main", UID)
    assert directory.resolve(CgroupOwner(UID, "ab" * 32)) is Unresolved.STARTING
    other = "11111111-2222-3333-4444-555555555555"
    assert directory.resolve(CgroupOwner(other, "cd" * 32)) is Unresolved.FOREIGN
    assert directory.resolve(None) is Unresolved.FOREIGN


def test_directory_forgets_deleted_pods_and_replaced_containers() -> None:
    directory = ContainerDirectory()
    directory.observe(_pod(UID, [("main", f"containerd://{CID}")]))
    restarted = "ef" * 32
    directory.observe(_pod(UID, [("main", f"containerd://{restarted}")]))
    assert directory.resolve(OWNER) is Unresolved.STARTING
    assert directory.resolve(CgroupOwner(UID, restarted)) == ContainerKey(
        "ml", "train", "main", UID
    )
    directory.forget(_pod(UID, []))
    assert directory.resolve(CgroupOwner(UID, restarted)) is Unresolved.FOREIGN
    assert len(directory) == 0


def test_static_pods_are_found_by_their_mirror_uid() -> None:
    directory = ContainerDirectory()
    config_hash = "6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d"
    mirror_uid = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    pod = _pod(mirror_uid, [("etcd", f"containerd://{CID}")])
    pod["metadata"]["annotations"] = {"kubernetes.io/config.mirror": config_hash}  # type: ignore[index]
    directory.observe(pod)
    owner = parse_cgroup(f"0::/kubepods/besteffort/pod{config_hash}/{CID}\n")
    assert owner == CgroupOwner(config_hash, CID)
    assert directory.resolve(owner) == ContainerKey("ml", "train", "etcd", mirror_uid)
    assert directory.resolve(CgroupOwner(config_hash, "ab" * 32)) is Unresolved.STARTING
