/* Memsets are GPU work like kernels (the device writes every byte), so they pass the same gate:
 * budget, then events around them. Their signature is the variant and the size, so repeated
 * memsets of one size are de-noised like repeated kernels. The synchronous forms run on the
 * legacy default stream (_v2_ptds: the per-thread one); CUDA Driver API, Memory Management. */
#include "hooks.h"
#include "launch.h"
#include "signature.h"

static CUresult gate(vgpu_launch *l, void *real, CUstream stream, int ptsz, size_t width,
                     size_t height)
{
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t w = width;
    uint64_t sig = vgpu_signature(real, (unsigned)(w >> 32), (unsigned)w, (unsigned)height, 0, 0,
                                  0, 0);
    return vgpu_launch_begin(l, stream, ptsz, sig);
}

/* One hook per variant, each calling the driver through its own exact prototype `params`. */
#define VGPU_MEMSET(name, params, stream, ptsz, width, height, ...)                               \
    VGPU_EXPORT CUresult name params                                                              \
    {                                                                                             \
        typedef CUresult(*fn) params;                                                             \
        fn real = REAL_CU(fn, name);                                                              \
        vgpu_launch l;                                                                            \
        CUresult rc = gate(&l, (void *)real, stream, ptsz, width, height);                        \
        if (rc != CUDA_SUCCESS)                                                                   \
            return rc;                                                                            \
        rc = real(__VA_ARGS__);                                                                   \
        vgpu_launch_end(&l, rc);                                                                  \
        return rc;                                                                                \
    }

#define D1(type) (CUdeviceptr dst, type value, size_t n)
#define D1_ASYNC(type) (CUdeviceptr dst, type value, size_t n, CUstream stream)
#define D2(type) (CUdeviceptr dst, size_t pitch, type value, size_t w, size_t h)
#define D2_ASYNC(type)                                                                            \
    (CUdeviceptr dst, size_t pitch, type value, size_t w, size_t h, CUstream stream)

#define SYNC_1D(name, type, ptsz) VGPU_MEMSET(name, D1(type), NULL, ptsz, n, 1, dst, value, n)
#define ASYNC_1D(name, type, ptsz)                                                                \
    VGPU_MEMSET(name, D1_ASYNC(type), stream, ptsz, n, 1, dst, value, n, stream)
#define SYNC_2D(name, type, ptsz)                                                                 \
    VGPU_MEMSET(name, D2(type), NULL, ptsz, w, h, dst, pitch, value, w, h)
#define ASYNC_2D(name, type, ptsz)                                                                \
    VGPU_MEMSET(name, D2_ASYNC(type), stream, ptsz, w, h, dst, pitch, value, w, h, stream)

SYNC_1D(cuMemsetD8_v2, unsigned char, 0)
SYNC_1D(cuMemsetD16_v2, unsigned short, 0)
SYNC_1D(cuMemsetD32_v2, unsigned int, 0)
SYNC_1D(cuMemsetD8_v2_ptds, unsigned char, 1)
SYNC_1D(cuMemsetD16_v2_ptds, unsigned short, 1)
SYNC_1D(cuMemsetD32_v2_ptds, unsigned int, 1)
ASYNC_1D(cuMemsetD8Async, unsigned char, 0)
ASYNC_1D(cuMemsetD16Async, unsigned short, 0)
ASYNC_1D(cuMemsetD32Async, unsigned int, 0)
ASYNC_1D(cuMemsetD8Async_ptsz, unsigned char, 1)
ASYNC_1D(cuMemsetD16Async_ptsz, unsigned short, 1)
ASYNC_1D(cuMemsetD32Async_ptsz, unsigned int, 1)
SYNC_2D(cuMemsetD2D8_v2, unsigned char, 0)
SYNC_2D(cuMemsetD2D16_v2, unsigned short, 0)
SYNC_2D(cuMemsetD2D32_v2, unsigned int, 0)
SYNC_2D(cuMemsetD2D8_v2_ptds, unsigned char, 1)
SYNC_2D(cuMemsetD2D16_v2_ptds, unsigned short, 1)
SYNC_2D(cuMemsetD2D32_v2_ptds, unsigned int, 1)
ASYNC_2D(cuMemsetD2D8Async, unsigned char, 0)
ASYNC_2D(cuMemsetD2D16Async, unsigned short, 0)
ASYNC_2D(cuMemsetD2D32Async, unsigned int, 0)
ASYNC_2D(cuMemsetD2D8Async_ptsz, unsigned char, 1)
ASYNC_2D(cuMemsetD2D16Async_ptsz, unsigned short, 1)
ASYNC_2D(cuMemsetD2D32Async_ptsz, unsigned int, 1)
