/* Stand-in libcuda.so.1: GPU work other than cuLaunchKernel: memsets and the deprecated
 * launches (CUDA Driver API reference, "Memory Management" and "Execution Control
 * [DEPRECATED]"), each taking simulated time on its stream like a kernel.
 *
 * - cuMemsetD8/D16/D32 and the 2D forms (_v2) fill N elements (or Width x Height elements of a
 *   pitched region) on the legacy default stream; they are asynchronous with respect to the host
 *   for device memory (the reference's "API synchronization behavior" note on memset). The
 *   ...Async forms take a stream. A memset takes SI_MEMSET_BYTES_PER_US bytes per microsecond
 *   (100 GB/s), so its time grows with its size. Destinations are not checked against
 *   allocations here.
 * - cuLaunchGrid/cuLaunchGridAsync run a grid_width x grid_height grid, cuLaunch a 1 x 1 grid,
 *   with the block shape and parameters set before by cuFuncSetBlockShape and cuParamSet*
 *   (still exported and documented by current drivers, deprecated since CUDA 4.0). Here only
 *   cuParamSetv at offset 0 is read, as the cost of a function whose cost is its parameter. */
#include <string.h>

#include "cuda_local.h"

#define SI_MEMSET_BYTES_PER_US 100000ull

static CUresult memset_work(CUdeviceptr dst, uint64_t bytes, CUstream s) {
    if (!dst)
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_submit(bytes * 1000 / SI_MEMSET_BYTES_PER_US, s);
}

SI_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
    (void)v;
    return memset_work(d, n, NULL);
}

SI_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
    (void)v;
    return memset_work(d, 2 * (uint64_t)n, NULL);
}

SI_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) {
    (void)v;
    return memset_work(d, 4 * (uint64_t)n, NULL);
}

SI_EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
    (void)v;
    return memset_work(d, n, s);
}

SI_EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
    (void)v;
    return memset_work(d, 2 * (uint64_t)n, s);
}

SI_EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
    (void)v;
    return memset_work(d, 4 * (uint64_t)n, s);
}

static CUresult memset_2d(CUdeviceptr d, size_t pitch, size_t elem, size_t w, size_t h,
                          CUstream s) {
    if (w * elem > pitch)
        return CUDA_ERROR_INVALID_VALUE;
    return memset_work(d, (uint64_t)(w * elem) * h, s);
}

SI_EXPORT CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w,
                                   size_t h) {
    (void)v;
    return memset_2d(d, pitch, 1, w, h, NULL);
}

SI_EXPORT CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w,
                                    size_t h) {
    (void)v;
    return memset_2d(d, pitch, 2, w, h, NULL);
}

SI_EXPORT CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned v, size_t w,
                                    size_t h) {
    (void)v;
    return memset_2d(d, pitch, 4, w, h, NULL);
}

SI_EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w,
                                     size_t h, CUstream s) {
    (void)v;
    return memset_2d(d, pitch, 1, w, h, s);
}

SI_EXPORT CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w,
                                      size_t h, CUstream s) {
    (void)v;
    return memset_2d(d, pitch, 2, w, h, s);
}

SI_EXPORT CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned v, size_t w,
                                      size_t h, CUstream s) {
    (void)v;
    return memset_2d(d, pitch, 4, w, h, s);
}

/* ---- deprecated execution control ---- */

SI_EXPORT CUresult cuFuncSetBlockShape(CUfunction f, int x, int y, int z) {
    if (!f || x <= 0 || y <= 0 || z <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuParamSetSize(CUfunction f, unsigned bytes) {
    (void)bytes;
    return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_EXPORT CUresult cuParamSetv(CUfunction f, int offset, void *ptr, unsigned bytes) {
    if (!f || !ptr || offset < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (offset == 0 && bytes >= sizeof(uint64_t))
        memcpy(&f->legacy_param_ns, ptr, sizeof(uint64_t));
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int w, int h, CUstream s) {
    if (!f || w <= 0 || h <= 0 || (!f->ns_per_block && !f->legacy_param_ns))
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_launch(f, (uint64_t)w * (uint64_t)h, f->legacy_param_ns, s);
}

SI_EXPORT CUresult cuLaunchGrid(CUfunction f, int w, int h) {
    return cuLaunchGridAsync(f, w, h, NULL);
}

SI_EXPORT CUresult cuLaunch(CUfunction f) { return cuLaunchGridAsync(f, 1, 1, NULL); }
