/* What the container is told about memory: the grant as the total, the grant less what the whole
 * container uses as free (never more than the device really has free). Also the entry points that
 * start CUDA and create contexts, where a process without a valid grant, or a GPU the container
 * does not hold, is refused. */
#include "hooks.h"
#include "state.h"

typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*info_fn)(size_t *, size_t *);
typedef CUresult (*total_fn)(size_t *, CUdevice);
typedef CUresult (*ctx_create_fn)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*ctx_create3_fn)(CUcontext *, CUexecAffinityParam *, int, unsigned int,
                                   CUdevice);
typedef CUresult (*ctx_create4_fn)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);

VGPU_EXPORT CUresult cuInit(unsigned int flags)
{
    init_fn real = REAL_CU(init_fn, cuInit);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    return real ? real(flags) : CUDA_ERROR_NOT_INITIALIZED;
}

static uint64_t free_of_grant(int index, uint64_t device_free)
{
    const vgpu_state *s = vgpu_state_get();
    uint64_t limit = s->limits.dev[index].memory;
    uint64_t used = vgpu_region_used(s->region, index);
    uint64_t left = used < limit ? limit - used : 0;
    return left < device_free ? left : device_free;
}

VGPU_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    info_fn real = REAL_CU(info_fn, cuMemGetInfo_v2);
    size_t device_free = 0, device_total = 0;
    int index;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_current_index(&index);
    if (rc == CUDA_SUCCESS)
        rc = real(&device_free, &device_total);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (free_bytes)
        *free_bytes = (size_t)free_of_grant(index, device_free);
    if (total_bytes)
        *total_bytes = (size_t)vgpu_state_get()->limits.dev[index].memory;
    return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    total_fn real = REAL_CU(total_fn, cuDeviceTotalMem_v2);
    int index;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_device_index(dev, &index);
    if (rc != CUDA_SUCCESS)
        return rc;
    size_t device_total = 0;
    rc = real(&device_total, dev);
    if (rc == CUDA_SUCCESS && bytes)
        *bytes = (size_t)vgpu_state_get()->limits.dev[index].memory;
    return rc;
}

/* Every form of cuCtxCreate (CUDA Driver API reference) creates a context on `dev` and makes it
 * current: refused on a GPU the container does not hold (or by a driver that lacks the form),
 * and remembered with its device once created. */
static CUresult admit(const void *real, CUdevice dev)
{
    int index;
    return real ? vgpu_device_index(dev, &index) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult noted(CUresult rc, const CUcontext *ctx, CUdevice dev)
{
    if (rc == CUDA_SUCCESS && ctx)
        vgpu_note_context(*ctx, dev);
    return rc;
}

/* CUDA 3.1 and before (what cuGetProcAddress hands out for "cuCtxCreate" below 3020). */
VGPU_EXPORT CUresult cuCtxCreate(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    ctx_create_fn real = REAL_CU(ctx_create_fn, cuCtxCreate);
    CUresult rc = admit(real, dev);
    return rc == CUDA_SUCCESS ? noted(real(ctx, flags, dev), ctx, dev) : rc;
}

VGPU_EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    ctx_create_fn real = REAL_CU(ctx_create_fn, cuCtxCreate_v2);
    CUresult rc = admit(real, dev);
    return rc == CUDA_SUCCESS ? noted(real(ctx, flags, dev), ctx, dev) : rc;
}

/* CUDA 11.4: "with execution affinity" (an array of CUexecAffinityParam, passed through). */
VGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext *ctx, CUexecAffinityParam *params, int count,
                                    unsigned int flags, CUdevice dev)
{
    ctx_create3_fn real = REAL_CU(ctx_create3_fn, cuCtxCreate_v3);
    CUresult rc = admit(real, dev);
    return rc == CUDA_SUCCESS ? noted(real(ctx, params, count, flags, dev), ctx, dev) : rc;
}

/* CUDA 12.5 (what cuCtxCreate is since CUDA 13.0): a CUctxCreateParams, passed through. */
VGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext *ctx, CUctxCreateParams *params, unsigned int flags,
                                    CUdevice dev)
{
    ctx_create4_fn real = REAL_CU(ctx_create4_fn, cuCtxCreate_v4);
    CUresult rc = admit(real, dev);
    return rc == CUDA_SUCCESS ? noted(real(ctx, params, flags, dev), ctx, dev) : rc;
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    retain_fn real = REAL_CU(retain_fn, cuDevicePrimaryCtxRetain);
    int index;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_device_index(dev, &index);
    if (rc == CUDA_SUCCESS)
        rc = real(ctx, dev);
    if (rc == CUDA_SUCCESS && ctx)
        vgpu_note_context(*ctx, dev);
    return rc;
}
