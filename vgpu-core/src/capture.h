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
/* The graph `stream` is capturing into and the capture sequence's id (*id), or NULL when the
 * stream is not in an active capture. */
CUgraph vgpu_capture_graph(CUstream stream, unsigned long long *id);
/* The id of the stream's capture sequence, active or invalidated; 0 when none. */
unsigned long long vgpu_capture_id(CUstream stream);

#endif
