/* Stand-in libcuda.so.1: stream-ordered allocation from memory pools, which keep what is freed.
 *
 * CUDA Driver API reference, "Stream Ordered Memory Allocator": a pool belongs to the device of
 * its CUmemPoolProps.location (cuMemPoolCreate), whatever context allocates from it
 * (cuMemAllocFromPoolAsync); cuMemAllocAsync allocates from the current pool of the stream's
 * device (cuDeviceGetMemPool; cuDeviceGetDefaultMemPool until cuDeviceSetMemPool). Memory freed
 * by cuMemFreeAsync returns to its pool, not to the device: cuMemPoolSetAttribute,
 * CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: "Amount of reserved memory in bytes to hold onto before
 * trying to release memory back to the OS. When more than the release threshold bytes of memory
 * are held by the memory pool, the allocator will try to release memory back to the OS on the
 * next call to stream, event or context synchronize. (default 0)"; cuMemPoolTrimTo "releases
 * memory back to the OS until the pool contains fewer than minBytesToKeep reserved bytes, or
 * there is no more memory that the allocator can safely release". CU_MEMPOOL_ATTR_RESERVED_MEM_
 * CURRENT is the pool's backing memory, _USED_MEM_CURRENT what is allocated from it.
 *
 * The model: a pool holds chunks of device memory, one per allocation it had to grow for; a free
 * marks its chunk unused, an allocation reuses an unused chunk large enough before growing.
 *
 * CUDA 13.0 adds pools that are not on a device: pinned host memory (CU_MEM_LOCATION_TYPE_HOST,
 * HOST_NUMA), and managed memory (CU_MEM_ALLOCATION_TYPE_MANAGED) with a preferred location or
 * none (CU_MEM_LOCATION_TYPE_NONE); cuMemGetDefaultMemPool and cuMemGetMemPool name a location's
 * default and current pool. Such a pool's chunks are not taken from a device here (`dev` -1):
 * they stand for host memory, or managed memory resident nowhere yet. */
#include <stdlib.h>

#include "cuda_local.h"

#define SI_CHUNKS 256
enum { ATTR_RELEASE_THRESHOLD = 4, ATTR_RESERVED_CURRENT = 5, ATTR_USED_CURRENT = 7 };

struct si_chunk {
    unsigned long long ptr; /* 0: slot empty */
    uint64_t bytes;
    int used;
};

struct si_pool {
    int dev;
    uint64_t threshold;
    struct si_pool *next; /* every pool of the process, for the synchronize calls */
    struct si_chunk chunk[SI_CHUNKS];
};

static struct si_pool *pools;
static struct si_pool *current[SI_MAX_GPUS], *defaults[SI_MAX_GPUS];
static struct si_pool *host_default, *managed_default; /* CUDA 13.0's location-less defaults */
static unsigned long long next_host = 0x7e0000000000ull; /* the addresses off-device chunks get */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t reserved(const struct si_pool *p, int used_only) {
    uint64_t total = 0;
    for (int i = 0; i < SI_CHUNKS; i++)
        if (p->chunk[i].ptr && (!used_only || p->chunk[i].used))
            total += p->chunk[i].bytes;
    return total;
}

/* Releases unused chunks until at most `keep` bytes stay reserved (under pool_mu). */
static void trim(struct si_pool *p, uint64_t keep) {
    uint64_t held = reserved(p, 0);
    for (int i = 0; i < SI_CHUNKS && held > keep; i++) {
        struct si_chunk *c = &p->chunk[i];
        int gone = c->ptr && !c->used && (p->dev < 0 || si_cu_give(c->ptr, SI_POOL) == 0);
        if (gone) {
            held -= c->bytes;
            c->ptr = 0;
        }
    }
}

void si_cu_pools_synchronized(void) {
    pthread_mutex_lock(&pool_mu);
    for (struct si_pool *p = pools; p; p = p->next)
        trim(p, p->threshold);
    pthread_mutex_unlock(&pool_mu);
}

static struct si_pool *pool_new(int dev) {
    struct si_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->dev = dev;
    pthread_mutex_lock(&pool_mu);
    p->next = pools;
    pools = p;
    pthread_mutex_unlock(&pool_mu);
    return p;
}

SI_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    int dev = props ? si_location_dev(props->location) : -1;
    int off_device = props && (props->allocType == 2 /* CU_MEM_ALLOCATION_TYPE_MANAGED */ ||
                               props->location.type == 2 || props->location.type == 3); /* host */
    if (!pool || dev >= n->cfg.ngpus || (dev < 0 && !off_device))
        return CUDA_ERROR_INVALID_VALUE;
    dev = props->allocType == 2 ? -1 : dev; /* managed: resident nowhere until touched */
    *pool = pool_new(dev);
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The pool's memory goes back at once when nothing is allocated from it; the stand-in keeps a
 * pool with live allocations (the driver releases it once they are freed). */
SI_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    trim(pool, 0);
    pthread_mutex_unlock(&pool_mu);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    if (!pool || dev < 0 || dev >= n->cfg.ngpus)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&si_cu_mu);
    if (!defaults[dev])
        defaults[dev] = pool_new(dev);
    *pool = defaults[dev];
    pthread_mutex_unlock(&si_cu_mu);
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* CUDA 13.0: the default pool of a location and allocation type (1 pinned, 2 managed). A device
 * location's pinned pool is the device's own; the host's pinned pool and the managed pool are one
 * each here, whatever host NUMA node or preferred location is named. */
SI_EXPORT CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *loc, int type) {
    int dev = loc ? si_location_dev(*loc) : -1;
    if (!pool || !loc || (type != 1 && type != 2))
        return CUDA_ERROR_INVALID_VALUE;
    if (type == 1 && dev >= 0)
        return cuDeviceGetDefaultMemPool(pool, dev);
    if (type == 1 && loc->type != 2 && loc->type != 3) /* host, host NUMA */
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&si_cu_mu);
    struct si_pool **slot = type == 1 ? &host_default : &managed_default;
    if (!*slot)
        *slot = pool_new(-1);
    *pool = *slot;
    pthread_mutex_unlock(&si_cu_mu);
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The current pool of a location: only devices' pinned pools can be changed here. */
SI_EXPORT CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *loc, int type) {
    CUresult rc = cuMemGetDefaultMemPool(pool, loc, type);
    int dev = loc ? si_location_dev(*loc) : -1;
    if (rc == CUDA_SUCCESS && type == 1 && dev >= 0 && current[dev])
        *pool = current[dev];
    return rc;
}

SI_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
    CUresult rc = cuDeviceGetDefaultMemPool(pool, dev);
    if (rc == CUDA_SUCCESS && current[dev])
        *pool = current[dev];
    return rc;
}

SI_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    if (!pool || dev < 0 || dev >= SI_MAX_GPUS || pool->dev != dev)
        return CUDA_ERROR_INVALID_VALUE;
    current[dev] = pool;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value) {
    if (!pool || !value || attr != ATTR_RELEASE_THRESHOLD)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    pool->threshold = *(cuuint64_t *)value;
    pthread_mutex_unlock(&pool_mu);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value) {
    if (!pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    cuuint64_t v = attr == ATTR_RELEASE_THRESHOLD ? pool->threshold
                   : attr == ATTR_RESERVED_CURRENT ? reserved(pool, 0)
                                                   : reserved(pool, 1);
    pthread_mutex_unlock(&pool_mu);
    if (attr != ATTR_RELEASE_THRESHOLD && attr != ATTR_RESERVED_CURRENT && attr != ATTR_USED_CURRENT)
        return CUDA_ERROR_INVALID_VALUE;
    *(cuuint64_t *)value = v;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    trim(pool, keep);
    pthread_mutex_unlock(&pool_mu);
    return CUDA_SUCCESS;
}

static CUresult pool_alloc(struct si_pool *p, CUdeviceptr *dptr, size_t bytes) {
    struct si_chunk *free_slot = NULL;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!dptr || !p || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    for (int i = 0; i < SI_CHUNKS && rc != CUDA_SUCCESS; i++) {
        struct si_chunk *c = &p->chunk[i];
        if (c->ptr && !c->used && c->bytes >= bytes) {
            c->used = 1;
            *dptr = c->ptr;
            rc = CUDA_SUCCESS;
        } else if (!c->ptr && !free_slot) {
            free_slot = c;
        }
    }
    if (rc != CUDA_SUCCESS && free_slot && p->dev < 0) {
        *free_slot = (struct si_chunk){next_host, bytes, 1};
        next_host += (bytes + 0xfffff) & ~0xfffffull;
        *dptr = free_slot->ptr;
        rc = CUDA_SUCCESS;
    } else if (rc != CUDA_SUCCESS && free_slot) {
        rc = si_cu_take(NULL, p->dev, bytes, SI_POOL, &free_slot->ptr);
        if (rc == CUDA_SUCCESS)
            *free_slot = (struct si_chunk){free_slot->ptr, bytes, 1};
        *dptr = free_slot->ptr;
    }
    pthread_mutex_unlock(&pool_mu);
    return rc;
}

/* On a capturing stream both allocations become graph allocation nodes (cuda_capture.c). */
SI_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                           CUstream s) {
    CUresult rc;
    if (!dptr || !pool || si_cu_capture_mem(si_cu_stream(s), pool->dev, bytes, dptr, &rc) == 0)
        return pool_alloc(pool, dptr, bytes);
    return rc;
}

SI_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    struct si_stream *st = si_cu_stream(s);
    CUmemoryPool pool = NULL;
    if (!st)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = cuDeviceGetMemPool(&pool, st->ctx->dev);
    if (rc == CUDA_SUCCESS && dptr && si_cu_capture_mem(st, st->ctx->dev, bytes, dptr, &rc))
        return rc;
    return rc ? rc : pool_alloc(pool, dptr, bytes);
}

/* The per-thread default stream variants: their NULL stream is CU_STREAM_PER_THREAD. */
SI_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    return cuMemAllocAsync(dptr, bytes, s ? s : SI_STREAM_PER_THREAD);
}

SI_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                CUmemoryPool pool, CUstream s) {
    return cuMemAllocFromPoolAsync(dptr, bytes, pool, s ? s : SI_STREAM_PER_THREAD);
}

/* Frees a pool or graph allocation (1), or answers 0 when `dptr` is neither. A pool's memory goes
 * back to its pool, a graph allocation's to the device's graph memory. */
int si_cu_pool_free(CUdeviceptr dptr) {
    if (si_cu_graph_free(dptr))
        return 1;
    pthread_mutex_lock(&pool_mu);
    for (struct si_pool *p = pools; p; p = p->next) {
        for (int i = 0; i < SI_CHUNKS; i++) {
            if (p->chunk[i].ptr == dptr && p->chunk[i].used) {
                p->chunk[i].used = 0;
                pthread_mutex_unlock(&pool_mu);
                return 1;
            }
        }
    }
    pthread_mutex_unlock(&pool_mu);
    return 0;
}

/* cuMemFreeAsync frees memory from any allocator; memory from cuMemAlloc goes back to the device. */
SI_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    CUresult rc;
    if (si_cu_capture_mem(si_cu_stream(s), 0, 0, &dptr, &rc))
        return rc; /* captured: a free node */
    return si_cu_pool_free(dptr) ? CUDA_SUCCESS : si_cu_mem_free(dptr);
}
