/* Graph memory nodes (graphmem.c): charged on their location's device from the moment added. */
#ifndef VGPU_GRAPHMEM_H
#define VGPU_GRAPHMEM_H

/* Lowers retained graph memory to what the driver reports (before refusing an allocation). */
void vgpu_graphmem_reconcile(void);
/* Forgets every graph (a forked child). */
void vgpu_graphmem_forget(void);

#endif
