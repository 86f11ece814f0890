/* The reservation protocol: check and count under the shared lock before the real allocation (so
 * two concurrent allocations cannot both fit in the last free bytes), undo on failure. */
#include "account.h"

#include "allocs.h"
#include "graphmem.h"
#include "pools.h"
#include "state.h"

CUresult vgpu_reserve(int index, uint64_t bytes)
{
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    uint64_t limit = s->limits.dev[index].memory;
    if (vgpu_region_reserve(s->region, index, bytes, limit) == 0)
        return CUDA_SUCCESS;
    vgpu_pools_reconcile(); /* pools may have released memory at a synchronize */
    vgpu_graphmem_reconcile();
    if (vgpu_region_reserve(s->region, index, bytes, limit) == 0)
        return CUDA_SUCCESS;
    return CUDA_ERROR_OUT_OF_MEMORY;
}

void vgpu_force_reserve(int index, uint64_t bytes)
{
    const vgpu_state *s = vgpu_state_get();
    if (s)
        vgpu_region_reserve(s->region, index, bytes, UINT64_MAX);
}

void vgpu_unreserve(int index, uint64_t bytes)
{
    const vgpu_state *s = vgpu_state_get();
    if (s)
        vgpu_region_release(s->region, index, bytes);
}

CUresult vgpu_settle(CUresult rc, int kind, uint64_t key, int index, uint64_t bytes)
{
    if (rc != CUDA_SUCCESS || vgpu_allocs_put(kind, key, index, bytes) != 0)
        vgpu_unreserve(index, bytes); /* unrecorded memory would never be given back */
    return rc;
}

int vgpu_forget(int kind, uint64_t key, int *index, uint64_t *bytes)
{
    return vgpu_allocs_take(kind, key, index, bytes) == 0 ? 1 : 0;
}

CUresult vgpu_freed(CUresult rc, int found, int kind, uint64_t key, int index, uint64_t bytes)
{
    if (!found)
        return rc;
    if (rc == CUDA_SUCCESS)
        vgpu_unreserve(index, bytes);
    else
        vgpu_allocs_put(kind, key, index, bytes);
    return rc;
}
