/* Stream-ordered allocation: a pool is charged what it reserves from its device, not what it
 * hands out. CUDA Driver API reference: a pool's memory lives on its CUmemPoolProps.location
 * (cuMemPoolCreate), whichever context allocates from it; cuMemAllocAsync uses the current pool
 * of the stream's device (cuDeviceSetMemPool: "cuMemAllocAsync allocates from the current mempool
 * of the provided stream's device"), not the current context's; memory freed with
 * cuMemFreeAsync returns to the pool, which keeps up to CU_MEMPOOL_ATTR_RELEASE_THRESHOLD bytes
 * and releases the rest "on the next call to stream, event or context synchronize", or on
 * cuMemPoolTrimTo; CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT is the pool's backing memory. So each
 * pool this process allocates from carries a charge on its own device, set to the driver's reserved figure after every allocation, free,
 * trim and destroy, and for every pool before an allocation would be refused (the driver may
 * have released memory at a synchronize we do not hook). An allocation first reserves its size
 * on the pool's device, so the pool cannot grow past the grant, and gives that back once the
 * pool's charge covers it. */
#include <pthread.h>
#include <stdlib.h>

#include "account.h"
#include "allocs.h"
#include "hooks.h"
#include "pools.h"
#include "state.h"

typedef CUresult (*attr_fn)(CUmemoryPool, int, void *);
typedef CUresult (*trim_fn)(CUmemoryPool, size_t);
typedef CUresult (*destroy_fn)(CUmemoryPool);
typedef CUresult (*create_fn)(CUmemoryPool *, const CUmemPoolProps *);
typedef CUresult (*get_pool_fn)(CUmemoryPool *, CUdevice);

enum { ATTR_RESERVED_MEM_CURRENT = 5 };

typedef struct {
    CUmemoryPool pool;
    CUdevice dev; /* its device's ordinal */
    int index;    /* limits index of its device; -1: a host pool, not device memory */
    int destroyed;
    uint64_t charged;
    uint64_t live; /* allocations not yet freed */
} pool_entry;

static pool_entry *pools;
static size_t npools, cap;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static pool_entry *find(CUmemoryPool pool)
{
    for (size_t i = 0; i < npools; i++)
        if (pools[i].pool == pool)
            return &pools[i];
    return NULL;
}

/* The pool's charge becomes what the driver says it reserves (under mu). When the driver cannot
 * say, the charge only grows by `grown` (what was just allocated): never less than the truth.
 * `held` is what the caller reserved for that allocation beforehand (vgpu_pool_begin), given back
 * in the same update: one region change, so an allocation the pool serves from what it already
 * reserves takes the region's lock once (at begin), not twice. */
static void reconcile(pool_entry *p, uint64_t grown, uint64_t held)
{
    attr_fn real = REAL_CU(attr_fn, cuMemPoolGetAttribute);
    unsigned long long reserved = 0;
    uint64_t now = p->charged + grown;
    if (p->destroyed) /* not queried again; freed by the driver once nothing is allocated */
        now = p->live ? now : 0;
    else if (real && real(p->pool, ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS)
        now = reserved;
    uint64_t before;
    if (__builtin_add_overflow(p->charged, held, &before))
        before = UINT64_MAX;
    if (now > before)
        vgpu_force_reserve(p->index, now - before);
    else if (now < before)
        vgpu_unreserve(p->index, before - now);
    p->charged = now;
    if (p->destroyed && p->live == 0)
        *p = pools[--npools];
}

void vgpu_pools_reconcile(void)
{
    pthread_mutex_lock(&mu);
    for (size_t i = npools; i-- > 0;)
        if (pools[i].index >= 0)
            reconcile(&pools[i], 0, 0);
    pthread_mutex_unlock(&mu);
}

__attribute__((constructor)) static void register_reclaimer(void)
{
    vgpu_account_reclaimer(vgpu_pools_reconcile);
}

void vgpu_pools_forget(void)
{
    npools = 0;
    pthread_mutex_init(&mu, NULL);
}

void vgpu_pool_note(CUmemoryPool pool, CUdevice dev, int index)
{
    pthread_mutex_lock(&mu);
    if (pool && !find(pool) && vgpu_grow((void **)&pools, &cap, npools, sizeof *pools) == 0)
        pools[npools++] = (pool_entry){pool, dev, index, 0, 0, 0};
    pthread_mutex_unlock(&mu);
}

CUresult vgpu_pool_device(CUmemoryPool pool, CUdevice *dev, int *index)
{
    pthread_mutex_lock(&mu);
    pool_entry *p = find(pool);
    if (p) {
        *dev = p->dev;
        *index = p->index;
    }
    pthread_mutex_unlock(&mu);
    if (p)
        return CUDA_SUCCESS;
    CUresult rc = vgpu_current_device(dev);
    if (rc == CUDA_SUCCESS)
        rc = vgpu_device_index(*dev, index);
    if (rc == CUDA_SUCCESS)
        vgpu_pool_note(pool, *dev, *index);
    return rc;
}

CUmemoryPool vgpu_device_pool(CUdevice dev)
{
    get_pool_fn get_pool = REAL_CU(get_pool_fn, cuDeviceGetMemPool);
    CUmemoryPool pool = NULL;
    int index;
    if (!get_pool || vgpu_device_index(dev, &index) != CUDA_SUCCESS ||
        get_pool(&pool, dev) != CUDA_SUCCESS)
        return NULL;
    vgpu_pool_note(pool, dev, index);
    return pool;
}

CUresult vgpu_pool_begin(CUmemoryPool pool, size_t bytes, int *index)
{
    CUdevice dev;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    CUresult rc = vgpu_pool_device(pool, &dev, index);
    if (rc != CUDA_SUCCESS || *index < 0)
        return rc;
    return vgpu_reserve(*index, bytes);
}

CUresult vgpu_pool_end(CUmemoryPool pool, int index, size_t bytes, CUresult rc, CUdeviceptr dptr)
{
    if (index < 0)
        return rc;
    pthread_mutex_lock(&mu);
    pool_entry *p = find(pool);
    if (p && rc == CUDA_SUCCESS &&
        vgpu_allocs_put(VGPU_KIND_POOLED, dptr, 0, (uint64_t)(uintptr_t)pool) == 0)
        p->live++;
    if (p)
        reconcile(p, rc == CUDA_SUCCESS ? bytes : 0, bytes);
    pthread_mutex_unlock(&mu);
    if (!p)
        vgpu_unreserve(index, bytes);
    return rc;
}

CUmemoryPool vgpu_pool_free_begin(CUdeviceptr dptr)
{
    int dev;
    uint64_t pool;
    if (vgpu_allocs_take(VGPU_KIND_POOLED, dptr, &dev, &pool) != 0)
        return NULL;
    return (CUmemoryPool)(uintptr_t)pool;
}

CUresult vgpu_pool_free_end(CUmemoryPool pool, CUdeviceptr dptr, CUresult rc)
{
    pthread_mutex_lock(&mu);
    pool_entry *p = find(pool);
    if (p && rc == CUDA_SUCCESS) {
        p->live--;
        reconcile(p, 0, 0);
    } else if (p) {
        vgpu_allocs_put(VGPU_KIND_POOLED, dptr, 0, (uint64_t)(uintptr_t)pool);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

enum { ALLOCATION_TYPE_MANAGED = 2 }; /* CU_MEM_ALLOCATION_TYPE_MANAGED (CUDA 13.0) */

/* Where a pool of `type` at `loc` is charged (*index; -1: not at all). A device location's pool
 * on that device (an unlisted GPU is refused). A managed pool without one ("no preferred
 * location", or the host preferred) holds managed memory, counted like cuMemAllocManaged's on
 * the current context's device, wherever its pages go. Any other pool holds host memory. */
static CUresult pool_home(int type, const CUmemLocation *loc, CUdevice *dev, int *index)
{
    *dev = 0;
    *index = -1;
    if (loc && vgpu_location_device(*loc, dev))
        return vgpu_device_index(*dev, index);
    if (type != ALLOCATION_TYPE_MANAGED)
        return CUDA_SUCCESS;
    CUresult rc = vgpu_current_device(dev);
    return rc == CUDA_SUCCESS ? vgpu_device_index(*dev, index) : rc;
}

VGPU_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    create_fn real = REAL_CU(create_fn, cuMemPoolCreate);
    int index = -1;
    CUdevice dev = 0;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    CUresult rc = props ? pool_home(props->allocType, &props->location, &dev, &index)
                        : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        rc = real(pool, props);
    if (rc == CUDA_SUCCESS && pool)
        vgpu_pool_note(*pool, dev, index);
    return rc;
}

/* CUDA 13.0: a location's default and current pool (cuMemGetDefaultMemPool, cuMemGetMemPool), of
 * a device, the host or a host NUMA node, pinned or managed. A pool never seen is otherwise taken
 * for the current device's (vgpu_pool_device), which would charge a host pool to a GPU. */
typedef CUresult (*location_pool_fn)(CUmemoryPool *, CUmemLocation *, int);

static CUresult location_pool(location_pool_fn real, CUmemoryPool *pool, CUmemLocation *loc,
                              int type)
{
    CUdevice dev;
    int index;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    CUresult rc = pool_home(type, loc, &dev, &index);
    if (rc == CUDA_SUCCESS)
        rc = real(pool, loc, type);
    if (rc == CUDA_SUCCESS && pool)
        vgpu_pool_note(*pool, dev, index);
    return rc;
}

VGPU_EXPORT CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *loc, int type)
{
    return location_pool(REAL_CU(location_pool_fn, cuMemGetDefaultMemPool), pool, loc, type);
}

VGPU_EXPORT CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *loc, int type)
{
    return location_pool(REAL_CU(location_pool_fn, cuMemGetMemPool), pool, loc, type);
}

static CUresult device_pool(get_pool_fn real, CUmemoryPool *pool, CUdevice dev)
{
    int index;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_device_index(dev, &index);
    if (rc == CUDA_SUCCESS)
        rc = real(pool, dev);
    if (rc == CUDA_SUCCESS && pool)
        vgpu_pool_note(*pool, dev, index);
    return rc;
}

VGPU_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(REAL_CU(get_pool_fn, cuDeviceGetDefaultMemPool), pool, dev);
}

VGPU_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(REAL_CU(get_pool_fn, cuDeviceGetMemPool), pool, dev);
}

VGPU_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    trim_fn real = REAL_CU(trim_fn, cuMemPoolTrimTo);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(pool, keep);
    pthread_mutex_lock(&mu);
    pool_entry *p = rc == CUDA_SUCCESS ? find(pool) : NULL;
    if (p && p->index >= 0)
        reconcile(p, 0, 0);
    pthread_mutex_unlock(&mu);
    return rc;
}

/* cuMemPoolDestroy: a pool with outstanding allocations is released once they are freed, so its
 * charge stays until then; the handle is no longer queried. */
VGPU_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    destroy_fn real = REAL_CU(destroy_fn, cuMemPoolDestroy);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(pool);
    pool_entry *p = rc == CUDA_SUCCESS ? find(pool) : NULL;
    if (p) {
        p->destroyed = 1;
        if (p->index < 0)
            *p = pools[--npools];
        else if (p->live == 0)
            reconcile(p, 0, 0);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
