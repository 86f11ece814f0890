/* Legacy CUDA IPC memory (ipc.c): what memory.c's free asks of it. */
#ifndef VGPU_IPC_H
#define VGPU_IPC_H

#include "driver_api.h"

typedef CUresult (*vgpu_free_fn)(CUdeviceptr);

/* cuMemFree of a pointer this process exported with cuIpcGetMemHandle: 1 with *rc the driver's
 * answer (the container's count then holds while an importer of it still does), or 0 when
 * `dptr` was never exported. */
int vgpu_ipc_free(CUdeviceptr dptr, vgpu_free_fn real, CUresult *rc);

#endif
