/* Legacy CUDA IPC memory (ipc.c): what memory.c's free asks of it. */
#ifndef VGPU_IPC_H
#define VGPU_IPC_H

#include <stdint.h>

#include "driver_api.h"

/* Before a cuMemFree or cuMemFreeAsync of `dptr`: 1 when this process exported it with
 * cuIpcGetMemHandle (its record taken, with the shared entry counting it), else 0. */
int vgpu_ipc_free_begin(CUdeviceptr dptr, int *index, uint64_t *entry);
/* After the driver's answer `rc`: this process leaves the entry on success (the container's count
 * then holds while an importer of it still does), or keeps the record on failure. */
CUresult vgpu_ipc_free_end(CUresult rc, CUdeviceptr dptr, int index, uint64_t entry);

#endif
