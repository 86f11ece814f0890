"""The NVML per-process utilisation adapter over a fake pynvml: each call asks only for samples
newer than the last it saw, several samples of one process count as their mean, "no sample"
is no usage, an NVML failure is a GpuBackendError, and a process's container comes from its
mountinfo under the configured proc root."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from vgpu.adapters.gpu import GpuBackendError
from vgpu.adapters.gpu_utilisation import MAX_MOUNTINFO_BYTES, NvmlUtilisation

ID = "0123456789abcdef0123456789abcdef"


class NVMLError(Exception):
    pass


class NVMLError_NotFound(NVMLError):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


@dataclass
class Sample:
    pid: int
    timeStamp: int
    smUtil: int


@dataclass
class FakeNvml:
    """One GPU; `samples` answers each call in turn; `asked` records lastSeenTimeStamp."""

    samples: list[list[Sample] | str | None]
    asked: list[int] = field(default_factory=list)
    broken: bool = False
    NVMLError: type[Exception] = NVMLError
    NVMLError_NotFound: type[Exception] = NVMLError_NotFound
    NVMLError_NotSupported: type[Exception] = NVMLError_NotSupported

    def nvmlDeviceGetCount(self) -> int:
        if self.broken:
            raise NVMLError("GPU is lost")
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        return i

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return "GPU-1"

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> Any:
        self.asked.append(since)
        answer = self.samples.pop(0)
        if answer is None:
            raise NVMLError_NotFound("no samples")
        if answer == "unsupported":
            raise NVMLError_NotSupported("MIG")
        return answer


def test_each_call_asks_for_samples_newer_than_the_last_it_saw() -> None:
    nvml = FakeNvml([[Sample(7, 100, 30), Sample(8, 120, 60)], [Sample(7, 300, 40)]])
    source = NvmlUtilisation(nvml)
    assert source.shares() == {"GPU-1": {7: 30.0, 8: 60.0}}
    assert source.shares() == {"GPU-1": {7: 40.0}}
    assert nvml.asked == [0, 120]


def test_several_samples_of_a_process_count_as_their_mean_and_no_sample_as_no_usage() -> None:
    nvml = FakeNvml([[Sample(7, 100, 30), Sample(7, 110, 50)], None])
    source = NvmlUtilisation(nvml)
    assert source.shares() == {"GPU-1": {7: 40.0}}
    assert source.shares() == {"GPU-1": {}}


def test_a_gpu_without_per_process_samples_shows_no_usage() -> None:
    """A MIG-enabled GPU answers NOT_SUPPORTED: its containers look alone (scales neutral)."""
    assert NvmlUtilisation(FakeNvml(["unsupported"])).shares() == {"GPU-1": {}}


def test_an_nvml_failure_is_a_backend_error() -> None:
    with pytest.raises(GpuBackendError, match="utilisation"):
        NvmlUtilisation(FakeNvml([], broken=True)).shares()


def test_a_processs_container_comes_from_its_mountinfo(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "mountinfo").write_text(
        f"1 0 0:1 /var/lib/vgpu/containers/{ID}/limits /run/vgpu ro - ext4 /dev/sda rw\n"
    )
    source = NvmlUtilisation(FakeNvml([]), tmp_path)
    assert source.container_of(42) == ID
    assert source.container_of(43) is None  # gone


def test_a_mountinfo_past_its_bound_is_read_no_further_and_names_no_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant that may mount in a namespace of its own (a user namespace) can give its process
    tens of thousands of mounts with paths of 4 KiB: the agent read each GPU process's whole
    mountinfo twice a second, hundreds of MB each. Past its bound the process is unattributed
    (which never raises a scale), and no more than the bound is read."""
    real = f"1 0 0:1 /var/lib/vgpu/containers/{ID}/limits /run/vgpu ro - ext4 /dev/sda rw\n"
    filler = "2 1 0:2 / /" + "m" * 4000 + " rw - tmpfs tmpfs rw\n"
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "mountinfo").write_text(real + filler * (MAX_MOUNTINFO_BYTES // 4000 + 1))
    read: list[int] = []
    os_read = os.read

    def counted(fd: int, n: int) -> bytes:
        data = os_read(fd, n)
        read.append(len(data))
        return data

    monkeypatch.setattr("vgpu.adapters.gpu_utilisation.os.read", counted)
    assert NvmlUtilisation(FakeNvml([]), tmp_path).container_of(42) is None
    assert 0 < sum(read) <= MAX_MOUNTINFO_BYTES + 1
