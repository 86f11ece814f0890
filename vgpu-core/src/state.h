/* The process's view of its container's grant: the limits, the shared region, and the mapping from
 * the devices CUDA and NVML hand out to `device` lines, always by UUID. */
#ifndef VGPU_STATE_H
#define VGPU_STATE_H

#include <stdint.h>

#include "driver_api.h"
#include "limits.h"
#include "region.h"

#ifndef VGPU_LIMITS_DIR
#define VGPU_LIMITS_DIR "/run/vgpu"
#endif
#ifndef VGPU_SHARED_DIR
#define VGPU_SHARED_DIR "/run/vgpu-shared"
#endif
#define VGPU_PERIOD_NS 100000000LL /* the cores budget's refill period (100 ms) */

typedef struct {
    vgpu_limits limits;
    vgpu_region *region;
    uint64_t *activity;
} vgpu_state;

/* The state, loaded once; NULL when the library fails closed (the reason was printed once). */
const vgpu_state *vgpu_state_get(void);

/* The current context's device: 0 and *dev, or a CUDA error. */
CUresult vgpu_current_device(CUdevice *dev);
/* Limits index of the current context's device: 0 and *index, or a CUDA error. */
CUresult vgpu_current_index(int *index);
/* The device of a stream's context (what cuMemAllocAsync allocates on): 0 and *dev, or a CUDA
 * error. */
CUresult vgpu_stream_device(CUstream stream, CUdevice *dev);
/* The device of a context (pushed for the moment): 0 and *dev, or a CUDA error. */
CUresult vgpu_context_device(CUcontext ctx, CUdevice *dev);
/* Limits index of a device ordinal: 0 and *index, or a CUDA error (unlisted: invalid device). */
CUresult vgpu_device_index(CUdevice dev, int *index);
/* Remembers which device a context belongs to (for drivers without cuCtxGetDevice). */
void vgpu_note_context(CUcontext ctx, CUdevice dev);

uint64_t vgpu_now_ns(void);

#endif
