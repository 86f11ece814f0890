/* Stand-in libcuda.so.1: every allocation path draws from the GPU's shared pool.
 *
 * Device pointers are fake addresses (nothing is ever dereferenced). Managed memory counts
 * against the current context's device; VMM `cuMemCreate` takes physical memory, which
 * `cuMemRelease` gives back (reserving and mapping address ranges take none). */
#include <stdlib.h>

#include "cuda_local.h"

#define SI_GRANULARITY (2ull << 20)

SI_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_take(si_cu_current(), -1, bytes, SI_MEM, dptr);
}

SI_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                      size_t height, unsigned elem) {
    if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) / 512 * 512; /* rows aligned to 512 bytes */
    CUresult rc = si_cu_take(si_cu_current(), -1, (uint64_t)p * height, SI_MEM, dptr);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}

SI_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned flags) {
    if (!dptr || bytes == 0 || (flags != 1 && flags != 2)) /* CU_MEM_ATTACH_GLOBAL / _HOST */
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_take(si_cu_current(), -1, bytes, SI_MEM, dptr);
}

SI_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    return dptr == 0 ? CUDA_SUCCESS : si_cu_give(dptr, SI_MEM);
}

SI_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    struct si_stream *st = si_cu_stream(s);
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return st ? si_cu_take(st->ctx, -1, bytes, SI_MEM, dptr) : CUDA_ERROR_INVALID_CONTEXT;
}

SI_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    (void)s;
    return si_cu_give(dptr, SI_MEM);
}

SI_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    if (!pool || !props || props->location.id < 0 || props->location.id >= n->cfg.ngpus)
        return CUDA_ERROR_INVALID_VALUE;
    struct si_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = props->location.id;
    *pool = p;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    free(pool);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                           CUstream s) {
    (void)s;
    if (!dptr || !pool || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_take(NULL, pool->dev, bytes, SI_MEM, dptr);
}

SI_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                 int option) {
    (void)option;
    if (!g || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *g = SI_GRANULARITY;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
                               const CUmemAllocationProp *prop, unsigned long long flags) {
    if (!handle || !prop || flags || bytes == 0 || bytes % SI_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type != 1) /* CU_MEM_LOCATION_TYPE_DEVICE */
        return CUDA_ERROR_NOT_SUPPORTED;
    return si_cu_take(NULL, prop->location.id, bytes, SI_VMM, handle);
}

SI_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    return si_cu_give(handle, SI_VMM);
}

SI_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
                                       CUdeviceptr addr, unsigned long long flags) {
    static uint64_t next = 0x7e0000000000ull;
    (void)align, (void)addr, (void)flags;
    if (!ptr || size == 0 || size % SI_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    *ptr = __atomic_fetch_add(&next, size + SI_GRANULARITY, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    return ptr && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
    return ptr && size && !offset && handle && !flags ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    return ptr && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static uint64_t element_bytes(int format, unsigned channels) {
    unsigned low = (unsigned)format & 0x0f;
    uint64_t size = format == 0x10 ? 2 : low == 1 || low == 8 ? 1 : low == 2 || low == 9 ? 2 : 4;
    return size * (channels ? channels : 1);
}

static CUresult array_create(struct si_array **out, uint64_t bytes) {
    struct si_array *a = calloc(1, sizeof(*a));
    if (!out || !a) {
        free(a);
        return out ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = si_cu_take(si_cu_current(), -1, bytes, SI_MEM, &a->mem);
    if (rc != CUDA_SUCCESS) {
        free(a);
        return rc;
    }
    *out = a;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuArrayCreate_v2(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR *d) {
    if (!d || !d->Width)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = d->Height ? d->Height : 1;
    return array_create(arr, d->Width * h * element_bytes(d->Format, d->NumChannels));
}

static uint64_t bytes3d(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned level) {
    uint64_t w = d->Width >> level, h = d->Height >> level, z = d->Depth >> level;
    return (w ? w : 1) * (h ? h : 1) * (z ? z : 1) * element_bytes(d->Format, d->NumChannels);
}

SI_EXPORT CUresult cuArray3DCreate_v2(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    if (!d || !d->Width)
        return CUDA_ERROR_INVALID_VALUE;
    return array_create(arr, bytes3d(d, 0));
}

SI_EXPORT CUresult cuArrayDestroy(CUarray arr) {
    if (!arr)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = si_cu_give(arr->mem, SI_MEM);
    if (rc == CUDA_SUCCESS)
        free(arr);
    return rc;
}

SI_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *arr, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                          unsigned levels) {
    uint64_t total = 0;
    if (!d || !d->Width || levels == 0 || levels > 32)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned l = 0; l < levels; l++)
        total += bytes3d(d, l);
    return array_create(arr, total);
}

SI_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray arr) { return cuArrayDestroy(arr); }

SI_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    struct si_ctx *c = si_cu_current();
    if (!n)
        return rc;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct si_shared *sh = si_lock(n);
    *total = n->cfg.gpu[c->dev].memory;
    *free_bytes = *total - sh->gpu[c->dev].used;
    si_unlock(n);
    return CUDA_SUCCESS;
}
