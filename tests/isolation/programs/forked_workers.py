"""A parent that loads the grant (NVML, as a launcher checks the GPUs) and then forks workers that
use CUDA each (ctypes), as a fork-based process pool does. The parent allocates nothing.

    python3 -m tests.isolation.programs.forked_workers BYTES STEP...

STEP `alloc:N` asks worker N to allocate BYTES on device 0 and prints `worker N rc CODE`;
`exit:N` ends worker N and goes on once it has exited. Both workers are forked first.
"""

from __future__ import annotations

import ctypes
import os
import sys

WORKERS = 2


def worker(commands: int, results: int, size: int) -> None:
    cuda = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()
    rc = cuda.cuInit(0) or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)
    rc = rc or cuda.cuCtxSetCurrent(ctx)
    with os.fdopen(commands) as asked, os.fdopen(results, "w") as answer:
        for _ in asked:
            ptr = ctypes.c_ulonglong()
            code = rc or cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size))
            answer.write(f"{code}\n")
            answer.flush()


def main(argv: list[str]) -> None:
    size, steps = int(argv[0]), argv[1:]
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    print(f"nvmlInit_v2 {nvml.nvmlInit_v2()}", flush=True)
    pids: list[int] = []
    asks: list[int] = []
    answers: list[int] = []
    for _ in range(WORKERS):
        command_r, command_w = os.pipe()
        result_r, result_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            for end in (command_w, result_r, *asks, *answers):  # others' ends: EOF must reach them
                os.close(end)
            worker(command_r, result_w, size)
            os._exit(0)
        os.close(command_r)
        os.close(result_w)
        pids.append(pid)
        asks.append(command_w)
        answers.append(result_r)
    for step in steps:
        action, n = step.split(":")[0], int(step.split(":")[1])
        if action == "exit":
            os.close(asks[n])
            os.waitpid(pids[n], 0)
        else:
            os.write(asks[n], b"alloc\n")
            print(f"worker {n} rc {os.read(answers[n], 64).decode().strip()}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
