/* The VMM handles this process tracks (vmm.c), shared with the hooks that export and import them
 * (vmmshare.c): one table, one mutex. */
#ifndef VGPU_VMM_H
#define VGPU_VMM_H

#include <stdint.h>

#include "driver_api.h"

typedef struct {
    CUmemGenericAllocationHandle handle;
    uint64_t bytes;
    int index; /* limits index of the allocation's location */
    int refs;
    int maps;
    int entry;  /* the shared entry counting it, or -1: this process's slot does */
    int priced; /* 1: bytes is its size; 0: an unshared import, counted by its mappings' extent */
} vmm_handle;

/* The table's mutex: the functions below, and the driver calls whose effect they record, run
 * under it. */
void vgpu_vmm_lock(void);
void vgpu_vmm_unlock(void);
/* The tracked handle, or NULL. */
vmm_handle *vgpu_vmm_find(CUmemGenericAllocationHandle handle);
/* Room for one more tracked handle, appended for the caller to fill; NULL out of host memory. */
vmm_handle *vgpu_vmm_new(void);

#endif
