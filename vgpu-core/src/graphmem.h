/* Graph memory nodes (graphmem.c): charged on their location's device from the moment added. */
#ifndef VGPU_GRAPHMEM_H
#define VGPU_GRAPHMEM_H

#include <stdint.h>

#include "driver_api.h"

/* Before a graph memory node of `bytes` on device `dev` is added: reserves them (*index names the
 * device, -1 when nothing was reserved). */
CUresult vgpu_graphmem_begin(CUdevice dev, uint64_t bytes, int *index);
/* After the driver answered `rc`: the node joins `graph`'s charge (captured by the capture
 * sequence `capture`, or 0), or the reservation is given back. Returns rc. */
CUresult vgpu_graphmem_end(CUgraph graph, unsigned long long capture, int index, CUdevice dev,
                           uint64_t bytes, CUresult rc);
/* Lowers retained graph memory to what the driver reports (before refusing an allocation). */
void vgpu_graphmem_reconcile(void);
/* Forgets every graph (a forked child). */
void vgpu_graphmem_forget(void);

/* 1 when the capture `capture` into `graph` is a recapture (cuStreamBeginRecaptureToGraph), whose
 * allocations redo memory nodes the graph already has and are not charged again. */
int vgpu_graphmem_recaptured(CUgraph graph, unsigned long long capture);

#endif
