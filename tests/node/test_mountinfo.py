"""A process's container, from the mount of its `/run/vgpu` (vgpu.node.mountinfo)."""

from __future__ import annotations

from vgpu.node.mountinfo import container_of_mountinfo

ID = "0123456789abcdef0123456789abcdef"
OTHER = "f" * 32
ROOT = "100 90 0:31 / / rw,relatime - overlay overlay rw\n"


def line(root: str, point: str = "/run/vgpu") -> str:
    return f"120 100 259:1 {root} {point} ro,nosuid master:1 - ext4 /dev/nvme0n1p1 rw\n"


def test_the_limits_bind_mount_names_the_container() -> None:
    text = ROOT + line(f"/var/lib/vgpu/containers/{ID}/limits")
    assert container_of_mountinfo(text) == ID


def test_a_process_outside_any_vgpu_container_has_none() -> None:
    assert container_of_mountinfo(ROOT) is None
    assert container_of_mountinfo(ROOT + line(f"/x/containers/{ID}/limits", "/mnt")) is None


def test_a_second_mount_stacked_on_run_vgpu_adds_nothing_and_two_ids_name_none() -> None:
    mine = line(f"/containers/{ID}/limits")
    assert container_of_mountinfo(ROOT + mine + line("/", "/run/vgpu")) == ID
    assert container_of_mountinfo(ROOT + mine + line(f"/containers/{OTHER}/limits")) is None


def test_escaped_paths_are_read_as_the_kernel_wrote_them() -> None:
    text = ROOT + line(f"/state\\040dir/containers/{ID}/limits")
    assert container_of_mountinfo(text) == ID
    assert container_of_mountinfo(ROOT + line(f"/containers/{ID}/limits/x")) is None
