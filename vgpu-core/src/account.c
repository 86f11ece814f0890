/* The reservation protocol: check and count under the shared lock before the real allocation (so
 * two concurrent allocations cannot both fit in the last free bytes), undo on failure. */
#include "account.h"

#include "allocs.h"
#include "hooks.h"
#include "state.h"

/* Set once each, by constructors at load time, before any thread can reserve. */
static vgpu_reclaim_fn reclaimers[4];
static int nreclaimers;

void vgpu_account_reclaimer(vgpu_reclaim_fn reclaim)
{
    if (nreclaimers < (int)(sizeof reclaimers / sizeof *reclaimers))
        reclaimers[nreclaimers++] = reclaim;
}

CUresult vgpu_reserve(int index, uint64_t bytes)
{
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    uint64_t limit = s->limits.dev[index].memory;
    if (vgpu_region_reserve(s->region, index, bytes, limit) == 0)
        return CUDA_SUCCESS;
    for (int i = 0; i < nreclaimers; i++)
        reclaimers[i](); /* pools and graphs may have released memory at a synchronize */
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

/* The context that frees an allocation of `kind` when it ends, or NULL. CUDA Driver API reference:
 * cuCtxDestroy "Destroys and cleans up all resources associated with the context",
 * cuDevicePrimaryCtxReset "Destroy all allocations and reset all state on the primary context",
 * and the last cuDevicePrimaryCtxRelease destroys the primary context. Linear, pitched and
 * managed memory, arrays and mipmapped arrays are allocated in the current context. */
static const void *owner_of(int kind)
{
    typedef CUresult (*get_ctx_fn)(CUcontext *);
    get_ctx_fn current = REAL_CU(get_ctx_fn, cuCtxGetCurrent);
    CUcontext ctx = NULL;
    int owned = kind == VGPU_KIND_POINTER || kind == VGPU_KIND_ARRAY || kind == VGPU_KIND_MIPMAP;
    if (!owned || !current || current(&ctx) != CUDA_SUCCESS)
        return NULL; /* then it is counted until freed one by one */
    return ctx;
}

static void gone(int index, uint64_t bytes)
{
    vgpu_unreserve(index, bytes);
}

void vgpu_context_freed(CUcontext ctx)
{
    vgpu_allocs_drop_owner(ctx, gone);
}

CUresult vgpu_settle(CUresult rc, int kind, uint64_t key, int index, uint64_t bytes)
{
    if (rc != CUDA_SUCCESS || vgpu_allocs_put_owned(kind, key, index, bytes, owner_of(kind)) != 0)
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
        vgpu_allocs_put_owned(kind, key, index, bytes, owner_of(kind));
    return rc;
}
