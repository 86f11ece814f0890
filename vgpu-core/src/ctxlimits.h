/* Context limits that size a buffer in device memory (ctxlimits.c). */
#ifndef VGPU_CTXLIMITS_H
#define VGPU_CTXLIMITS_H

#include "driver_api.h"

/* After the driver destroyed `ctx` (or reset it, or released its last retain): what its limits
 * were charged is given back. */
void vgpu_ctxlimits_gone(CUcontext ctx);
/* Forgets every context's charges (a forked child holds none of its parent's contexts). */
void vgpu_ctxlimits_forget(void);

#endif
