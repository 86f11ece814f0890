/* Reserve-then-allocate and free-then-release, shared by every allocation hook. */
#ifndef VGPU_ACCOUNT_H
#define VGPU_ACCOUNT_H

#include <stdint.h>

#include "driver_api.h"

/* Lowers a charge to what the driver now holds (memory it may have released unseen). */
typedef void (*vgpu_reclaim_fn)(void);
/* Registers a reclaimer, run before a reservation is refused (pools.c and graphmem.c register
 * theirs when the library loads: they charge through here, so this module names neither). */
void vgpu_account_reclaimer(vgpu_reclaim_fn reclaim);
/* Reserves `bytes` on limits index `index`: CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY (after the
 * reclaimers ran). */
CUresult vgpu_reserve(int index, uint64_t bytes);
/* Counts `bytes` the driver already holds, even past the limit (later reservations then fail). */
void vgpu_force_reserve(int index, uint64_t bytes);
/* Gives back a reservation whose allocation failed or was freed. */
void vgpu_unreserve(int index, uint64_t bytes);
/* After the real allocation: records it on success, gives the reservation back on failure. */
CUresult vgpu_settle(CUresult rc, int kind, uint64_t key, int index, uint64_t bytes);
/* Before the real free: forgets the allocation (1 with index and size, 0 when not ours). */
int vgpu_forget(int kind, uint64_t key, int *index, uint64_t *bytes);
/* After the real free: gives the memory back on success, remembers it again on failure. */
CUresult vgpu_freed(CUresult rc, int found, int kind, uint64_t key, int index, uint64_t bytes);
/* After the driver destroyed `ctx` (or reset it): gives back what was allocated in it and not
 * freed (vgpu_settle records each allocation's context). */
void vgpu_context_freed(CUcontext ctx);

#endif
