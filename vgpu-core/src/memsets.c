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

/* One hook per variant, each calling the driver through its own exact prototype. */
#define VGPU_MEMSET_1D(name, type, ptsz)                                                          \
    VGPU_EXPORT CUresult name(CUdeviceptr dst, type value, size_t n)                              \
    {                                                                                             \
        typedef CUresult (*fn)(CUdeviceptr, type, size_t);             \
        fn real = REAL_CU(fn, name);                                                        \
        vgpu_launch l;                                                                            \
        CUresult rc = gate(&l, (void *)real, NULL, ptsz, n, 1);                                   \
        if (rc != CUDA_SUCCESS)                                                                   \
            return rc;                                                                            \
        rc = real(dst, value, n);                                                                 \
        vgpu_launch_end(&l, rc);                                                                  \
        return rc;                                                                                \
    }

#define VGPU_MEMSET_1D_ASYNC(name, type, ptsz)                                                    \
    VGPU_EXPORT CUresult name(CUdeviceptr dst, type value, size_t n, CUstream stream)             \
    {                                                                                             \
        typedef CUresult (*fn)(CUdeviceptr, type, size_t, CUstream);   \
        fn real = REAL_CU(fn, name);                                            \
        vgpu_launch l;                                                                            \
        CUresult rc = gate(&l, (void *)real, stream, ptsz, n, 1);                                 \
        if (rc != CUDA_SUCCESS)                                                                   \
            return rc;                                                                            \
        rc = real(dst, value, n, stream);                                                         \
        vgpu_launch_end(&l, rc);                                                                  \
        return rc;                                                                                \
    }

#define VGPU_MEMSET_2D(name, type, ptsz)                                                          \
    VGPU_EXPORT CUresult name(CUdeviceptr dst, size_t pitch, type value, size_t w, size_t h)      \
    {                                                                                             \
        typedef CUresult (*fn)(CUdeviceptr, size_t, type, size_t, size_t); \
        fn real = REAL_CU(fn, name);                                                        \
        vgpu_launch l;                                                                            \
        CUresult rc = gate(&l, (void *)real, NULL, ptsz, w, h);                                   \
        if (rc != CUDA_SUCCESS)                                                                   \
            return rc;                                                                            \
        rc = real(dst, pitch, value, w, h);                                                       \
        vgpu_launch_end(&l, rc);                                                                  \
        return rc;                                                                                \
    }

#define VGPU_MEMSET_2D_ASYNC(name, type, ptsz)                                                    \
    VGPU_EXPORT CUresult name(CUdeviceptr dst, size_t pitch, type value, size_t w, size_t h,      \
                              CUstream stream)                                                    \
    {                                                                                             \
        typedef CUresult (*fn)(CUdeviceptr, size_t, type, size_t, size_t, CUstream); \
        fn real = REAL_CU(fn, name);                                            \
        vgpu_launch l;                                                                            \
        CUresult rc = gate(&l, (void *)real, stream, ptsz, w, h);                                 \
        if (rc != CUDA_SUCCESS)                                                                   \
            return rc;                                                                            \
        rc = real(dst, pitch, value, w, h, stream);                                               \
        vgpu_launch_end(&l, rc);                                                                  \
        return rc;                                                                                \
    }

VGPU_MEMSET_1D(cuMemsetD8_v2, unsigned char, 0)
VGPU_MEMSET_1D(cuMemsetD16_v2, unsigned short, 0)
VGPU_MEMSET_1D(cuMemsetD32_v2, unsigned int, 0)
VGPU_MEMSET_1D(cuMemsetD8_v2_ptds, unsigned char, 1)
VGPU_MEMSET_1D(cuMemsetD16_v2_ptds, unsigned short, 1)
VGPU_MEMSET_1D(cuMemsetD32_v2_ptds, unsigned int, 1)
VGPU_MEMSET_1D_ASYNC(cuMemsetD8Async, unsigned char, 0)
VGPU_MEMSET_1D_ASYNC(cuMemsetD16Async, unsigned short, 0)
VGPU_MEMSET_1D_ASYNC(cuMemsetD32Async, unsigned int, 0)
VGPU_MEMSET_1D_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1)
VGPU_MEMSET_1D_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 1)
VGPU_MEMSET_1D_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 1)
VGPU_MEMSET_2D(cuMemsetD2D8_v2, unsigned char, 0)
VGPU_MEMSET_2D(cuMemsetD2D16_v2, unsigned short, 0)
VGPU_MEMSET_2D(cuMemsetD2D32_v2, unsigned int, 0)
VGPU_MEMSET_2D(cuMemsetD2D8_v2_ptds, unsigned char, 1)
VGPU_MEMSET_2D(cuMemsetD2D16_v2_ptds, unsigned short, 1)
VGPU_MEMSET_2D(cuMemsetD2D32_v2_ptds, unsigned int, 1)
VGPU_MEMSET_2D_ASYNC(cuMemsetD2D8Async, unsigned char, 0)
VGPU_MEMSET_2D_ASYNC(cuMemsetD2D16Async, unsigned short, 0)
VGPU_MEMSET_2D_ASYNC(cuMemsetD2D32Async, unsigned int, 0)
VGPU_MEMSET_2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1)
VGPU_MEMSET_2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 1)
VGPU_MEMSET_2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 1)
