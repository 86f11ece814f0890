/* Where managed memory may be placed. CUDA Driver API reference: cuMemPrefetchAsync migrates a
 * managed range to `dstDevice` (CU_DEVICE_CPU, -1, for the host), cuMemPrefetchAsync_v2 (CUDA
 * 12.2) to a CUmemLocation; cuMemAdvise sets a preferred location or a device that accesses the
 * range (CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_MEM_ADVISE_SET_ACCESSED_BY, and their UNSET
 * forms; "the device argument is ignored" for CU_MEM_ADVISE_SET/UNSET_READ_MOSTLY), and
 * cuMemAdvise_v2 the same with a CUmemLocation. None of them needs a context on that GPU, so
 * managed memory (counted where it was allocated, memory.c) could otherwise be moved into the
 * memory of a GPU the container does not hold: a prefetch to, or a SET advice naming, a GPU the
 * container does not hold is refused as if the GPU were absent (CUDA_ERROR_INVALID_DEVICE); the
 * host and held GPUs pass, and so do the UNSET advices, which only undo. */
#include "hooks.h"
#include "state.h"

typedef CUresult (*prefetch_fn)(CUdeviceptr, size_t, CUdevice, CUstream);
typedef CUresult (*prefetch2_fn)(CUdeviceptr, size_t, CUmemLocation, unsigned int, CUstream);
typedef CUresult (*advise_fn)(CUdeviceptr, size_t, int, CUdevice);
typedef CUresult (*advise2_fn)(CUdeviceptr, size_t, int, CUmemLocation);

enum { DEVICE_CPU = -1, ADVISE_SET_PREFERRED_LOCATION = 3, ADVISE_SET_ACCESSED_BY = 5 };

/* 0 when a GPU named by a location may hold the range; the host always may. */
static CUresult placeable(const void *real, int on_device, CUdevice dev)
{
    int index;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    return on_device ? vgpu_device_index(dev, &index) : CUDA_SUCCESS;
}

static CUresult prefetch(prefetch_fn real, CUdeviceptr dptr, size_t count, CUdevice dst,
                         CUstream stream)
{
    CUresult rc = placeable(real, dst != DEVICE_CPU, dst);
    return rc == CUDA_SUCCESS ? real(dptr, count, dst, stream) : rc;
}

static CUresult prefetch2(prefetch2_fn real, CUdeviceptr dptr, size_t count, CUmemLocation loc,
                          unsigned int flags, CUstream stream)
{
    CUdevice dev = 0;
    int on_device = vgpu_location_device(loc, &dev);
    CUresult rc = placeable(real, on_device, dev);
    return rc == CUDA_SUCCESS ? real(dptr, count, loc, flags, stream) : rc;
}

VGPU_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr dptr, size_t count, CUdevice dst,
                                        CUstream stream)
{
    return prefetch(REAL_CU(prefetch_fn, cuMemPrefetchAsync), dptr, count, dst, stream);
}

VGPU_EXPORT CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr dptr, size_t count, CUdevice dst,
                                             CUstream stream)
{
    return prefetch(REAL_CU(prefetch_fn, cuMemPrefetchAsync_ptsz), dptr, count, dst, stream);
}

VGPU_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr dptr, size_t count, CUmemLocation loc,
                                           unsigned int flags, CUstream stream)
{
    return prefetch2(REAL_CU(prefetch2_fn, cuMemPrefetchAsync_v2), dptr, count, loc, flags,
                     stream);
}

VGPU_EXPORT CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr dptr, size_t count,
                                                CUmemLocation loc, unsigned int flags,
                                                CUstream stream)
{
    return prefetch2(REAL_CU(prefetch2_fn, cuMemPrefetchAsync_v2_ptsz), dptr, count, loc, flags,
                     stream);
}

/* The advices that direct a range to the GPU they name. */
static int places(int advice)
{
    return advice == ADVISE_SET_PREFERRED_LOCATION || advice == ADVISE_SET_ACCESSED_BY;
}

VGPU_EXPORT CUresult cuMemAdvise(CUdeviceptr dptr, size_t count, int advice, CUdevice dev)
{
    advise_fn real = REAL_CU(advise_fn, cuMemAdvise);
    int on_device = places(advice) && dev != DEVICE_CPU;
    CUresult rc = placeable(real, on_device, dev);
    return rc == CUDA_SUCCESS ? real(dptr, count, advice, dev) : rc;
}

VGPU_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr dptr, size_t count, int advice,
                                    CUmemLocation loc)
{
    advise2_fn real = REAL_CU(advise2_fn, cuMemAdvise_v2);
    CUdevice dev = 0;
    int on_device = places(advice) && vgpu_location_device(loc, &dev);
    CUresult rc = placeable(real, on_device, dev);
    return rc == CUDA_SUCCESS ? real(dptr, count, advice, loc) : rc;
}
