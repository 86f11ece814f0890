/* Throttling one launch: wait for budget, measure the launch's busy time with events around it. */
#ifndef VGPU_LAUNCH_H
#define VGPU_LAUNCH_H

#include <stdint.h>

#include "driver_api.h"

typedef struct {
    int measure; /* events recorded around this launch (the process lock is held until end) */
    int index;
    uint64_t signature;
    void *track;
    CUevent start;
    CUstream stream;
} vgpu_launch;

/* Before the real launch: CUDA_SUCCESS to go ahead, or the error to answer. */
CUresult vgpu_launch_begin(vgpu_launch *t, CUstream stream, int per_thread_stream,
                           uint64_t signature);
/* After the real launch (always called after a successful begin). */
void vgpu_launch_end(vgpu_launch *t, CUresult rc);
/* Forgets the pending measurements (a forked child has none of its parent's contexts). */
void vgpu_launch_forget(void);

#endif
