"""`NvmlBackend.process_usage` over NVML's three running-process lists, through a scripted
`pynvml`: what NVML reports in several lists merged per (GPU, process), and a list that the
installed nvidia-ml-py or the driver lacks skipped. (The stand-in libnvidia-ml tests the same
end to end in tests/node/test_nvml_standin.py; this pins the cases it cannot stage.)"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from vgpu.adapters.gpu import GpuBackendError, NvmlBackend

A, B = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"
COMPUTE = "nvmlDeviceGetComputeRunningProcesses"
GRAPHICS = "nvmlDeviceGetGraphicsRunningProcesses"
MPS = "nvmlDeviceGetMPSComputeRunningProcesses"


@dataclass
class Proc:
    pid: int
    usedGpuMemory: int | None  # pynvml's field name


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # pynvml's class names
    pass


class NVMLError_FunctionNotFound(NVMLError):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


Lists = dict[str, dict[str, list[Proc] | type[NVMLError]]]


def fake_pynvml(lists: Lists, *, lacks: tuple[str, ...] = ()) -> types.ModuleType:
    """A `pynvml` of two GPUs whose list functions answer `lists[function][uuid]` (an error
    class: raised); a function in `lacks` is absent from the module (an older nvidia-ml-py)."""
    nv = types.ModuleType("pynvml")
    for error in (
        NVMLError,
        NVMLError_LibraryNotFound,
        NVMLError_FunctionNotFound,
        NVMLError_NotSupported,
        NVMLError_GpuIsLost,
    ):
        setattr(nv, error.__name__, error)
    nv.nvmlInit = lambda: None  # type: ignore[attr-defined]
    nv.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nv.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    nv.nvmlDeviceGetHandleByIndex = lambda i: (A, B)[i]  # type: ignore[attr-defined]
    nv.nvmlDeviceGetUUID = lambda handle: handle  # type: ignore[attr-defined]

    def answer(name: str) -> Callable[[str], list[Proc]]:
        def fn(handle: str) -> list[Proc]:
            got = lists.get(name, {}).get(handle, [])
            if isinstance(got, type):
                raise got()
            return got

        fn.__name__ = name
        return fn

    for name in (COMPUTE, GRAPHICS, MPS):
        if name not in lacks:
            setattr(nv, name, answer(name))
    return nv


def usage(backend: NvmlBackend) -> list[tuple[str, int, int | None]]:
    return sorted((u.gpu_uuid, u.pid, u.used_bytes) for u in backend.process_usage())


@pytest.fixture
def backend_of(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., NvmlBackend]]:
    def make(lists: Lists, **kw: Any) -> NvmlBackend:
        monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(lists, **kw))
        return NvmlBackend()

    yield make


def test_graphics_and_mps_processes_are_read_with_the_compute_ones(
    backend_of: Callable[..., NvmlBackend],
) -> None:
    backend = backend_of(
        {
            COMPUTE: {A: [Proc(10, 100)]},
            GRAPHICS: {A: [Proc(11, 200)], B: [Proc(12, 300)]},
            MPS: {B: [Proc(13, 400)]},
        }
    )
    assert usage(backend) == [(A, 10, 100), (A, 11, 200), (B, 12, 300), (B, 13, 400)]


def test_a_process_in_several_lists_counts_once_per_gpu_with_its_largest_usage(
    backend_of: Callable[..., NvmlBackend],
) -> None:
    """Each list reports "all of the memory used by the application" (NVML reference): the
    same bytes, so the largest is kept, never the sum."""
    backend = backend_of(
        {
            COMPUTE: {A: [Proc(10, 100)], B: [Proc(10, None)]},
            GRAPHICS: {A: [Proc(10, 250)], B: [Proc(10, 70)]},
            MPS: {A: [Proc(10, 120)]},
        }
    )
    assert usage(backend) == [(A, 10, 250), (B, 10, 70)]


def test_a_process_whose_usage_no_list_knows_is_still_reported(
    backend_of: Callable[..., NvmlBackend],
) -> None:
    backend = backend_of({COMPUTE: {A: [Proc(10, None)]}, GRAPHICS: {A: [Proc(10, None)]}})
    assert usage(backend) == [(A, 10, None)]


@pytest.mark.parametrize("missing", [NVMLError_FunctionNotFound, NVMLError_NotSupported])
def test_a_list_the_driver_lacks_or_does_not_support_is_skipped(
    backend_of: Callable[..., NvmlBackend],
    missing: type[NVMLError],
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = backend_of(
        {
            COMPUTE: {A: [Proc(10, 100)]},
            GRAPHICS: {A: missing, B: missing},
            MPS: {A: missing, B: missing},
        }
    )
    with caplog.at_level(logging.WARNING):
        assert usage(backend) == [(A, 10, 100)]
        assert usage(backend) == [(A, 10, 100)]
    missing_lines = [r for r in caplog.records if "missing" in r.getMessage()]
    if missing is NVMLError_FunctionNotFound:  # once per function, not per GPU or poll
        assert len(missing_lines) == 2, caplog.text
    else:
        assert missing_lines == []


def test_a_list_an_older_nvidia_ml_py_lacks_is_skipped(
    backend_of: Callable[..., NvmlBackend],
) -> None:
    backend = backend_of({COMPUTE: {A: [Proc(10, 100)]}}, lacks=(GRAPHICS, MPS))
    assert usage(backend) == [(A, 10, 100)]


def test_another_error_of_a_graphics_list_is_still_an_error(
    backend_of: Callable[..., NvmlBackend],
) -> None:
    backend = backend_of({COMPUTE: {A: [Proc(10, 100)]}, GRAPHICS: {B: NVMLError_GpuIsLost}})
    with pytest.raises(GpuBackendError):
        backend.process_usage()
