/* Launch measurement beside stream capture: which streams are capturing, and running our own
 * potentially unsafe calls (event queries and syncs) in the RELAXED interaction mode. */
#ifndef VGPU_CAPTURE_H
#define VGPU_CAPTURE_H

#include "driver_api.h"

/* 1 when work on `stream` is captured, not run (a driver without capture captures nothing). */
int vgpu_capture_active(CUstream stream);
/* Switches this thread to the RELAXED mode; returns the mode to restore (-1: none). */
int vgpu_capture_relax(void);
void vgpu_capture_unrelax(int mode);

#endif
