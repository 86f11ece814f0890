/* Stand-in libcuda.so.1: every allocation path draws from the GPU's shared pool.
 *
 * Device pointers are fake addresses (nothing is ever dereferenced). Managed memory counts
 * against the current context's device. Virtual memory management is in cuda_vmm.c,
 * stream-ordered allocation and pools in cuda_pool.c. */
#include <stdlib.h>

#include "cuda_local.h"

/* Allocations made in a context end with it. CUDA Driver API reference: cuCtxDestroy "Destroys
 * and cleans up all resources associated with the context"; cuDevicePrimaryCtxReset "Destroy all
 * allocations and reset all state on the primary context"; cuDevicePrimaryCtxRelease, at the
 * last release, "the primary context of device dev will be destroyed". So each allocation of the
 * current context (linear, pitched, managed, arrays) is known by its context, and what is still
 * allocated when the context closes is freed then (si_cu_mem_close); a later free of it fails. */
struct owned {
    unsigned long long ptr;
    struct si_ctx *ctx;
    struct owned *next;
};
static struct owned *owned; /* under si_cu_mu */

static CUresult take_owned(struct si_ctx *c, uint64_t bytes, unsigned long long *ptr) {
    CUresult rc = si_cu_take(c, -1, bytes, SI_MEM, ptr);
    struct owned *o = rc == CUDA_SUCCESS ? malloc(sizeof(*o)) : NULL;
    if (rc == CUDA_SUCCESS && !o) {
        si_cu_give(*ptr, SI_MEM);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (o) {
        pthread_mutex_lock(&si_cu_mu);
        *o = (struct owned){*ptr, c, owned};
        owned = o;
        pthread_mutex_unlock(&si_cu_mu);
    }
    return rc;
}

CUresult si_cu_mem_free(unsigned long long ptr) {
    pthread_mutex_lock(&si_cu_mu);
    for (struct owned **p = &owned; *p; p = &(*p)->next)
        if ((*p)->ptr == ptr) {
            struct owned *o = *p;
            *p = o->next;
            free(o);
            break;
        }
    pthread_mutex_unlock(&si_cu_mu);
    return si_cu_give(ptr, SI_MEM);
}

void si_cu_mem_close(struct si_ctx *c) {
    for (struct owned **p = &owned; *p;) {
        struct owned *o = *p;
        if (o->ctx != c) {
            p = &o->next;
            continue;
        }
        *p = o->next;
        si_cu_give(o->ptr, SI_MEM);
        free(o);
    }
}

SI_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return take_owned(si_cu_current(), bytes, dptr);
}

/* The 32-bit ABI of CUDA 3.1 and before (cuda.h then declared CUdeviceptr and the size as 32-bit
 * unsigned int; 3.2 added the _v2 entry points, and cuGetProcAddress still maps a name to the v1
 * function for a version below 3020). Whether a current 64-bit driver still serves it is not
 * documented either way, so the stand-in serves it: the worst case for the interposer. */
SI_EXPORT CUresult cuMemAlloc(unsigned *dptr, unsigned bytes) {
    unsigned long long p = 0;
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = take_owned(si_cu_current(), bytes, &p);
    *dptr = (unsigned)p;
    return rc;
}

SI_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                      size_t height, unsigned elem) {
    if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) / 512 * 512; /* rows aligned to 512 bytes */
    CUresult rc = take_owned(si_cu_current(), (uint64_t)p * height, dptr);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}

SI_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned flags) {
    if (!dptr || bytes == 0 || (flags != 1 && flags != 2)) /* CU_MEM_ATTACH_GLOBAL / _HOST */
        return CUDA_ERROR_INVALID_VALUE;
    return take_owned(si_cu_current(), bytes, dptr);
}

/* Where managed memory should be (CUDA Driver API reference, Unified Addressing):
 * cuMemPrefetchAsync(devPtr, count, dstDevice, hStream) and, since CUDA 12.2,
 * cuMemPrefetchAsync_v2(devPtr, count, CUmemLocation, flags, hStream) migrate a managed range to
 * a GPU ("which must have non-zero value for the device attribute
 * CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS") or to the host (CU_DEVICE_CPU, -1; a host or
 * host NUMA location); cuMemAdvise(devPtr, count, advice, device) and cuMemAdvise_v2(..., advice,
 * CUmemLocation) set a preferred location or a device that accesses it
 * (CU_MEM_ADVISE_SET_PREFERRED_LOCATION 3, _SET_ACCESSED_BY 5, their UNSET 4 and 6; for
 * CU_MEM_ADVISE_SET/UNSET_READ_MOSTLY, 1 and 2, the device is ignored). The stand-in checks the
 * destination and keeps each managed allocation counted where it was allocated: page placement
 * is not simulated. */
#define SI_DEVICE_CPU (-1)
#define SI_LOCATION_DEVICE 1
#define SI_LOCATION_HOST_NUMA_CURRENT 4

typedef struct {
    int type, id;
} si_location; /* CUmemLocation */

static CUresult destination(int type, int id) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    if (type < SI_LOCATION_DEVICE || type > SI_LOCATION_HOST_NUMA_CURRENT)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == SI_LOCATION_DEVICE && (id < 0 || id >= n->cfg.ngpus))
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

static si_location device_location(CUdevice d) {
    si_location loc = {d == SI_DEVICE_CPU ? 2 : SI_LOCATION_DEVICE, d}; /* 2: _TYPE_HOST */
    return loc;
}

SI_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr dptr, size_t count, si_location loc,
                                         unsigned flags, CUstream s) {
    if (!dptr || !count || flags)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = destination(loc.type, loc.id);
    if (rc == CUDA_SUCCESS && !si_cu_stream(s))
        rc = CUDA_ERROR_INVALID_HANDLE;
    return rc;
}

SI_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr dptr, size_t count, CUdevice dst, CUstream s) {
    return cuMemPrefetchAsync_v2(dptr, count, device_location(dst), 0, s);
}

SI_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr dptr, size_t count, int advice, si_location loc) {
    if (!dptr || !count || advice < 1 || advice > 6)
        return CUDA_ERROR_INVALID_VALUE;
    return advice <= 2 ? CUDA_SUCCESS : destination(loc.type, loc.id);
}

SI_EXPORT CUresult cuMemAdvise(CUdeviceptr dptr, size_t count, int advice, CUdevice d) {
    return cuMemAdvise_v2(dptr, count, advice, device_location(d));
}

/* cuMemFree also takes what cuMemAllocAsync and cuMemAllocFromPoolAsync returned (CUDA Driver
 * API reference, cuMemFree), which goes back to its pool. */
SI_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    if (dptr == 0 || si_cu_pool_free(dptr))
        return CUDA_SUCCESS;
    return si_cu_mem_free(dptr);
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
    CUresult rc = take_owned(si_cu_current(), bytes, &a->mem);
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
    CUresult rc = si_cu_mem_free(arr->mem);
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
