/* The 32-bit entry points of CUDA 3.1 and before (cuda.h then declared CUdeviceptr and sizes as
 * 32-bit unsigned int; 3.2 added the _v2 functions, which every header since maps the names to).
 * Drivers still export the old symbols, and cuGetProcAddress hands them out for a version below
 * 3020. Whether a current driver still allocates through them is not documented, and nothing
 * built in the last decade calls them, so they are refused rather than counted: they answer
 * CUDA_ERROR_NOT_SUPPORTED, whether reached by linking, dlsym or cuGetProcAddress (which maps
 * the driver's pointer to these hooks like any other). */
#include "driver_api.h"
#include "hooks.h"

VGPU_EXPORT CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytes)
{
    (void)dptr, (void)bytes;
    return CUDA_ERROR_NOT_SUPPORTED;
}

VGPU_EXPORT CUresult cuMemAllocPitch(unsigned int *dptr, unsigned int *pitch, unsigned int width,
                                     unsigned int height, unsigned int element_bytes)
{
    (void)dptr, (void)pitch, (void)width, (void)height, (void)element_bytes;
    return CUDA_ERROR_NOT_SUPPORTED;
}

VGPU_EXPORT CUresult cuArrayCreate(CUarray *array, const void *desc)
{
    (void)array, (void)desc;
    return CUDA_ERROR_NOT_SUPPORTED;
}

VGPU_EXPORT CUresult cuArray3DCreate(CUarray *array, const void *desc)
{
    (void)array, (void)desc;
    return CUDA_ERROR_NOT_SUPPORTED;
}

VGPU_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    (void)free_bytes, (void)total;
    return CUDA_ERROR_NOT_SUPPORTED;
}

VGPU_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    (void)bytes, (void)dev;
    return CUDA_ERROR_NOT_SUPPORTED;
}
