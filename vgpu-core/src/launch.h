/* Throttling one launch: wait for budget, measure the launch's busy time with events around it. */
#ifndef VGPU_LAUNCH_H
#define VGPU_LAUNCH_H

#include <stdint.h>

#include "driver_api.h"

enum { VGPU_UNCHARGED = 0, VGPU_MEASURED = 1, VGPU_ESTIMATED = 2 };

typedef struct {
    int charge; /* VGPU_MEASURED or VGPU_ESTIMATED: the process lock is held until end */
    int index;
    uint64_t signature;
    uint64_t epoch; /* vgpu_signature_epoch() when it began */
    uint64_t begun_ns;
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
/* Before a context goes (destroyed, reset, or maybe released: `destroying` says whether it
 * surely goes): charges what completed in it and drops its measurement track. */
void vgpu_launch_context_ending(CUcontext ctx, int destroying);
/* After a context went without its events being destroyed by us (their handles died with it). */
void vgpu_launch_context_gone(CUcontext ctx);
/* The work of launches of `signature` changed (an executable graph updated or destroyed): their
 * measurement history starts afresh (signature.c). */
void vgpu_launch_restart(uint64_t signature);

#endif
