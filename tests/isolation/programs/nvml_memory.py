"""Reports each GPU's memory as NVML tells a program in the container (ctypes: dlopen + dlsym,
the way Python frameworks reach NVML), optionally after using CUDA first.

    python3 -m tests.isolation.programs.nvml_memory [cuda-first] [alloc BYTES]

Prints `UUID total BYTES` per GPU NVML lists; with `alloc`, allocates BYTES twice through CUDA
on every device it can and prints `cuda DEVICE rc CODE` for each.
"""

from __future__ import annotations

import ctypes
import sys


class Memory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


def nvml_report(nvml: ctypes.CDLL) -> None:
    rc = nvml.nvmlInit_v2()
    if rc != 0:
        print(f"nvmlInit_v2 {rc}")
        sys.exit(4)
    count = ctypes.c_uint()
    nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
    for i in range(count.value):
        handle = ctypes.c_void_p()
        nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle))
        uuid = ctypes.create_string_buffer(96)
        nvml.nvmlDeviceGetUUID(handle, uuid, 96)
        mem = Memory()
        rc = nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem))
        print(f"{uuid.value.decode()} total {mem.total if rc == 0 else -rc}")


def cuda_alloc(cuda: ctypes.CDLL, size: int) -> None:
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    for dev in range(count.value):
        ctx = ctypes.c_void_p()
        rc = cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        if rc == 0:
            cuda.cuCtxSetCurrent(ctx)
            ptr = ctypes.c_ulonglong()
            rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size))
        print(f"cuda {dev} rc {rc}")


def main(argv: list[str]) -> None:
    cuda_first = "cuda-first" in argv
    size = int(argv[argv.index("alloc") + 1]) if "alloc" in argv else 0
    cuda = ctypes.CDLL("libcuda.so.1")
    if cuda_first:
        print(f"cuInit {cuda.cuInit(0)}")
        for _ in range(2 if size else 0):
            cuda_alloc(cuda, size)
    nvml_report(ctypes.CDLL("libnvidia-ml.so.1"))
    if not cuda_first:
        print(f"cuInit {cuda.cuInit(0)}")
        for _ in range(2 if size else 0):
            cuda_alloc(cuda, size)


if __name__ == "__main__":
    main(sys.argv[1:])
