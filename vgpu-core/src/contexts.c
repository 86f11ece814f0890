/* Context lifetimes: a context's measurement track (its pending launches and pooled events, in
 * launch.c) ends with the context, and so does what its limits were charged (ctxlimits.c) and
 * what was allocated in it and never freed (account.c), once the driver has really destroyed
 * it. Before a context is destroyed (cuCtxDestroy) or reset
 * (cuDevicePrimaryCtxReset: "destroys and cleans up all resources associated with the current
 * device in the current process"), what ran in it is charged and its events are destroyed;
 * releasing a primary context destroys it only with its last retain, so the track is dropped when
 * cuDevicePrimaryCtxGetState says it is no longer active. A green context (CUDA 12.4) is
 * destroyed by cuGreenCtxDestroy, with "any resources provisioned for this green context"; its
 * work was measured in the context cuCtxFromGreenCtx names (that of its streams, cuStreamGetCtx),
 * whose track ends there too: nothing else would ever charge a destroyed context's last
 * launches. */
#include "account.h"
#include "ctxlimits.h"
#include "hooks.h"
#include "launch.h"

typedef CUresult (*destroy_fn)(CUcontext);
typedef CUresult (*device_fn)(CUdevice);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*state_fn)(CUdevice, unsigned int *, int *);
typedef CUresult (*green_destroy_fn)(CUgreenCtx);
typedef CUresult (*from_green_fn)(CUcontext *, CUgreenCtx);

static int primary_active(CUdevice dev)
{
    state_fn get_state = REAL_CU(state_fn, cuDevicePrimaryCtxGetState);
    unsigned int flags = 0;
    int active = 0;
    return get_state && get_state(dev, &flags, &active) == CUDA_SUCCESS && active;
}

/* The device's primary context while it is active (retaining an active one creates nothing). */
static CUcontext primary_of(CUdevice dev)
{
    retain_fn retain = REAL_CU(retain_fn, cuDevicePrimaryCtxRetain);
    device_fn release = REAL_CU(device_fn, cuDevicePrimaryCtxRelease_v2);
    CUcontext ctx = NULL;
    if (!release)
        release = REAL_CU(device_fn, cuDevicePrimaryCtxRelease);
    if (!retain || !release || !primary_active(dev) || retain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    release(dev);
    return ctx;
}

VGPU_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    destroy_fn real = REAL_CU(destroy_fn, cuCtxDestroy_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    vgpu_launch_context_ending(ctx, 1);
    CUresult rc = real(ctx);
    if (rc == CUDA_SUCCESS) {
        vgpu_ctxlimits_gone(ctx);
        vgpu_context_freed(ctx);
    }
    return rc;
}

VGPU_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx green)
{
    green_destroy_fn real = REAL_CU(green_destroy_fn, cuGreenCtxDestroy);
    from_green_fn from_green = REAL_CU(from_green_fn, cuCtxFromGreenCtx);
    CUcontext ctx = NULL;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!from_green || from_green(&ctx, green) != CUDA_SUCCESS)
        ctx = NULL;
    vgpu_launch_context_ending(ctx, 1);
    return real(green); /* what its limits were charged stays (fail closed): NVIDIA does not say
                         * whether a green context's limits are its own or its device's */
}

static CUresult reset(device_fn real, CUdevice dev)
{
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUcontext ctx = primary_of(dev);
    vgpu_launch_context_ending(ctx, 1);
    CUresult rc = real(dev);
    if (rc == CUDA_SUCCESS) {
        vgpu_ctxlimits_gone(ctx);
        vgpu_context_freed(ctx);
    }
    return rc;
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return reset(REAL_CU(device_fn, cuDevicePrimaryCtxReset), dev);
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return reset(REAL_CU(device_fn, cuDevicePrimaryCtxReset_v2), dev);
}

static CUresult release(device_fn real, CUdevice dev)
{
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUcontext ctx = primary_of(dev);
    vgpu_launch_context_ending(ctx, 0);
    CUresult rc = real(dev);
    if (rc == CUDA_SUCCESS && ctx && !primary_active(dev)) {
        vgpu_launch_context_gone(ctx);
        vgpu_ctxlimits_gone(ctx);
        vgpu_context_freed(ctx);
    }
    return rc;
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return release(REAL_CU(device_fn, cuDevicePrimaryCtxRelease), dev);
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return release(REAL_CU(device_fn, cuDevicePrimaryCtxRelease_v2), dev);
}
