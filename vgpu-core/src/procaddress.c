/* cuGetProcAddress: how the CUDA runtime (11.3+) reaches the driver. The driver resolves the
 * name, version and flags to a function; when that function is one we hook (cuMemAlloc ->
 * cuMemAlloc_v2, per-thread-stream variants, ...), the caller gets our hook instead. */
#include "hooks.h"
#include "state.h"

typedef CUresult (*proc_fn)(const char *, void **, int, unsigned long long);
typedef CUresult (*proc2_fn)(const char *, void **, int, unsigned long long, int *);

VGPU_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                      unsigned long long flags)
{
    proc_fn real = REAL_CU(proc_fn, cuGetProcAddress);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(symbol, pfn, version, flags);
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = vgpu_hook_for_real(*pfn);
    return rc;
}

VGPU_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         unsigned long long flags, int *status)
{
    proc2_fn real = REAL_CU(proc2_fn, cuGetProcAddress_v2);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(symbol, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = vgpu_hook_for_real(*pfn);
    return rc;
}
