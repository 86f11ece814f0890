/* Linear device memory: plain, pitched and managed allocations, counted on the current context's
 * device before the driver is asked and given back when freed; stream-ordered and pool
 * allocations, whose pool is charged on its own device (pools.c), or which become graph memory
 * nodes when their stream is capturing (graphmem.c). */
#include "account.h"
#include "allocs.h"
#include "capture.h"
#include "graphmem.h"
#include "hooks.h"
#include "ipc.h"
#include "pools.h"
#include "state.h"

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*managed_fn)(CUdeviceptr *, size_t, unsigned int);
typedef CUresult (*async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);

/* Reserves on the current device; on success *index names it. */
static CUresult begin(size_t bytes, int *index)
{
    CUresult rc = vgpu_current_index(index);
    return rc != CUDA_SUCCESS ? rc : vgpu_reserve(*index, bytes);
}

#define MISSING(fn) if (!(fn)) return CUDA_ERROR_NOT_INITIALIZED

VGPU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    alloc_fn real = REAL_CU(alloc_fn, cuMemAlloc_v2);
    int index;
    MISSING(real);
    CUresult rc = begin(bytes, &index);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(dptr, bytes);
    return vgpu_settle(rc, VGPU_KIND_POINTER, rc == CUDA_SUCCESS ? *dptr : 0, index, bytes);
}

VGPU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
    managed_fn real = REAL_CU(managed_fn, cuMemAllocManaged);
    int index;
    MISSING(real);
    CUresult rc = begin(bytes, &index);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(dptr, bytes, flags);
    return vgpu_settle(rc, VGPU_KIND_POINTER, rc == CUDA_SUCCESS ? *dptr : 0, index, bytes);
}

/* A stream-ordered allocation on a capturing stream is a graph memory node on the pool's device
 * (`dev`), charged at capture (graphmem.c); 0 when the stream is not capturing. */
static int captured(CUstream stream, CUdevice dev, size_t bytes, CUresult *rc,
                    CUresult (*call)(void *), void *args)
{
    unsigned long long capture;
    int index;
    CUgraph graph = vgpu_capture_graph(stream, &capture);
    if (!graph)
        return 0;
    if (vgpu_graphmem_recaptured(graph, capture)) {
        *rc = call(args); /* one of the graph's own nodes, charged already */
        return 1;
    }
    *rc = vgpu_graphmem_begin(dev, bytes, &index);
    if (*rc == CUDA_SUCCESS)
        *rc = vgpu_graphmem_end(graph, capture, index, dev, bytes, call(args));
    return 1;
}

/* Outside capture: the pool is charged what it reserves (pools.c); an allocation whose pool
 * cannot be found is counted by itself on the pool's device. */
static CUresult pooled(CUmemoryPool pool, CUdevice dev, size_t bytes, CUdeviceptr *dptr,
                       CUresult (*call)(void *), void *args)
{
    int index;
    CUresult rc = pool ? vgpu_pool_begin(pool, bytes, &index) : vgpu_device_index(dev, &index);
    if (rc == CUDA_SUCCESS && !pool)
        rc = vgpu_reserve(index, bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = call(args);
    CUdeviceptr got = rc == CUDA_SUCCESS ? *dptr : 0;
    if (pool)
        return vgpu_pool_end(pool, index, bytes, rc, got);
    return vgpu_settle(rc, VGPU_KIND_POINTER, got, index, bytes);
}

typedef struct {
    async_fn async;
    pool_fn from_pool;
    CUdeviceptr *dptr;
    size_t bytes;
    CUmemoryPool pool;
    CUstream stream;
    int ptsz; /* a per-thread default stream variant: its NULL stream is CU_STREAM_PER_THREAD */
} async_args;

static CUresult call_async(void *p)
{
    async_args *a = p;
    if (a->from_pool)
        return a->from_pool(a->dptr, a->bytes, a->pool, a->stream);
    return a->async(a->dptr, a->bytes, a->stream);
}

/* cuMemAllocAsync draws from the current pool of the stream's device (not the current
 * context's); cuMemAllocFromPoolAsync from `pool`, on the pool's own device. */
static CUresult alloc_async(async_args *a)
{
    CUdevice dev;
    int index;
    CUresult rc;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    if (a->from_pool)
        rc = vgpu_pool_device(a->pool, &dev, &index);
    else
        rc = vgpu_stream_device(a->stream, &dev);
    if (rc == CUDA_SUCCESS && a->from_pool && index < 0)
        return call_async(a); /* a host pool: not device memory */
    /* The per-thread variants' NULL stream is the thread's own, which can be captured (only
     * CU_STREAM_LEGACY cannot): asked as NULL, the driver would answer for the legacy stream. */
    CUstream query = a->ptsz && !a->stream ? (CUstream)0x2 : a->stream; /* CU_STREAM_PER_THREAD */
    if (rc != CUDA_SUCCESS || captured(query, dev, a->bytes, &rc, call_async, a))
        return rc;
    CUmemoryPool pool = a->from_pool ? a->pool : vgpu_device_pool(dev);
    return pooled(pool, dev, a->bytes, a->dptr, call_async, a);
}

VGPU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    async_args a = {REAL_CU(async_fn, cuMemAllocAsync), NULL, dptr, bytes, NULL, stream, 0};
    MISSING(a.async);
    return alloc_async(&a);
}

VGPU_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    async_args a = {REAL_CU(async_fn, cuMemAllocAsync_ptsz), NULL, dptr, bytes, NULL, stream, 1};
    MISSING(a.async);
    return alloc_async(&a);
}

VGPU_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                             CUstream stream)
{
    async_args a = {NULL, REAL_CU(pool_fn, cuMemAllocFromPoolAsync), dptr, bytes, pool, stream,
                    0};
    MISSING(a.from_pool);
    return alloc_async(&a);
}

VGPU_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                  CUmemoryPool pool, CUstream stream)
{
    async_args a = {NULL, REAL_CU(pool_fn, cuMemAllocFromPoolAsync_ptsz), dptr, bytes, pool,
                    stream, 1};
    MISSING(a.from_pool);
    return alloc_async(&a);
}

/* The driver chooses the pitch, so the estimate (width x height) is corrected afterwards and the
 * allocation undone if the corrected size no longer fits. */
VGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                        size_t height, unsigned int element_bytes)
{
    pitch_fn real = REAL_CU(pitch_fn, cuMemAllocPitch_v2);
    free_fn real_free = REAL_CU(free_fn, cuMemFree_v2);
    uint64_t estimate, actual;
    int index;
    MISSING(real);
    if (__builtin_mul_overflow((uint64_t)width, (uint64_t)height, &estimate))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = begin(estimate, &index);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(dptr, pitch, width, height, element_bytes);
    if (rc != CUDA_SUCCESS)
        return vgpu_settle(rc, VGPU_KIND_POINTER, 0, index, estimate);
    if (__builtin_mul_overflow((uint64_t)*pitch, (uint64_t)height, &actual))
        actual = UINT64_MAX;
    if (actual > estimate && vgpu_reserve(index, actual - estimate) != CUDA_SUCCESS) {
        if (real_free)
            real_free(*dptr);
        vgpu_unreserve(index, estimate);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (actual < estimate)
        vgpu_unreserve(index, estimate - actual);
    return vgpu_settle(rc, VGPU_KIND_POINTER, *dptr, index, actual);
}

VGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    free_fn real = REAL_CU(free_fn, cuMemFree_v2);
    int index = 0;
    uint64_t bytes = 0;
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    int found = vgpu_forget(VGPU_KIND_POINTER, dptr, &index, &bytes);
    CUmemoryPool pool = found ? NULL : vgpu_pool_free_begin(dptr);
    if (pool)
        return vgpu_pool_free_end(pool, dptr, real(dptr));
    if (!found && vgpu_ipc_free_begin(dptr, &index, &bytes))
        return vgpu_ipc_free_end(real(dptr), dptr, index, bytes); /* exported (ipc.c) */
    return vgpu_freed(real(dptr), found, VGPU_KIND_POINTER, dptr, index, bytes);
}

static CUresult free_async(free_async_fn real, CUdeviceptr dptr, CUstream stream)
{
    int index = 0;
    uint64_t bytes = 0;
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    int found = vgpu_forget(VGPU_KIND_POINTER, dptr, &index, &bytes);
    CUmemoryPool pool = found ? NULL : vgpu_pool_free_begin(dptr);
    if (pool)
        return vgpu_pool_free_end(pool, dptr, real(dptr, stream));
    if (!found && vgpu_ipc_free_begin(dptr, &index, &bytes))
        return vgpu_ipc_free_end(real(dptr, stream), dptr, index, bytes); /* exported (ipc.c) */
    return vgpu_freed(real(dptr, stream), found, VGPU_KIND_POINTER, dptr, index, bytes);
}

VGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    return free_async(REAL_CU(free_async_fn, cuMemFreeAsync), dptr, stream);
}

VGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return free_async(REAL_CU(free_async_fn, cuMemFreeAsync_ptsz), dptr, stream);
}
