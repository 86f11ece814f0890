/* Every way to start work on the GPU goes through the same gate: kernels (plain, extended,
 * cooperative, per-thread default stream variants, and the deprecated cuLaunch/cuLaunchGrid that
 * current drivers still serve: CUDA Driver API, "Execution Control [DEPRECATED]") and whole CUDA
 * graphs, whose busy time is measured around the graph as a whole (memsets: memsets.c). */
#include "hooks.h"
#include "launch.h"
#include "signature.h"

typedef CUresult (*kernel_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*kernel_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*coop_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void **);
typedef CUresult (*multi_fn)(CUDA_LAUNCH_PARAMS *, unsigned, unsigned);
typedef CUresult (*graph_fn)(CUgraphExec, CUstream);

static CUresult kernel(kernel_fn real, int ptsz, CUfunction f, unsigned gx, unsigned gy,
                       unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                       CUstream stream, void **params, void **extra)
{
    vgpu_launch l;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t sig = vgpu_signature(f, gx, gy, gz, bx, by, bz, shared);
    CUresult rc = vgpu_launch_begin(&l, stream, ptsz, sig);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
    vgpu_launch_end(&l, rc);
    return rc;
}

VGPU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                    CUstream stream, void **params, void **extra)
{
    return kernel(REAL_CU(kernel_fn, cuLaunchKernel), 0, f, gx, gy, gz, bx, by, bz, shared,
                  stream, params, extra);
}

VGPU_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                         unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                         CUstream stream, void **params, void **extra)
{
    return kernel(REAL_CU(kernel_fn, cuLaunchKernel_ptsz), 1, f, gx, gy, gz, bx, by, bz, shared,
                  stream, params, extra);
}

static CUresult kernel_ex(kernel_ex_fn real, int ptsz, const CUlaunchConfig *config, CUfunction f,
                          void **params, void **extra)
{
    vgpu_launch l;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!config)
        return real(config, f, params, extra);
    uint64_t sig = vgpu_signature(f, config->gridDimX, config->gridDimY, config->gridDimZ,
                                  config->blockDimX, config->blockDimY, config->blockDimZ,
                                  config->sharedMemBytes);
    CUresult rc = vgpu_launch_begin(&l, config->hStream, ptsz, sig);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(config, f, params, extra);
    vgpu_launch_end(&l, rc);
    return rc;
}

VGPU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra)
{
    return kernel_ex(REAL_CU(kernel_ex_fn, cuLaunchKernelEx), 0, config, f, params, extra);
}

VGPU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                           void **params, void **extra)
{
    return kernel_ex(REAL_CU(kernel_ex_fn, cuLaunchKernelEx_ptsz), 1, config, f, params, extra);
}

static CUresult cooperative(coop_fn real, int ptsz, CUfunction f, unsigned gx, unsigned gy,
                            unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                            CUstream stream, void **params)
{
    vgpu_launch l;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t sig = vgpu_signature(f, gx, gy, gz, bx, by, bz, shared);
    CUresult rc = vgpu_launch_begin(&l, stream, ptsz, sig);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(f, gx, gy, gz, bx, by, bz, shared, stream, params);
    vgpu_launch_end(&l, rc);
    return rc;
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz,
                                               unsigned shared, CUstream stream, void **params)
{
    return cooperative(REAL_CU(coop_fn, cuLaunchCooperativeKernel), 0, f, gx, gy, gz, bx, by, bz,
                       shared, stream, params);
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                    unsigned gz, unsigned bx, unsigned by,
                                                    unsigned bz, unsigned shared, CUstream stream,
                                                    void **params)
{
    return cooperative(REAL_CU(coop_fn, cuLaunchCooperativeKernel_ptsz), 1, f, gx, gy, gz, bx, by,
                       bz, shared, stream, params);
}

/* Deprecated by NVIDIA; gated on the current device and measured on the first device's stream. */
VGPU_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned n,
                                                          unsigned flags)
{
    multi_fn real = REAL_CU(multi_fn, cuLaunchCooperativeKernelMultiDevice);
    vgpu_launch l;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!list || n == 0)
        return real(list, n, flags);
    const CUDA_LAUNCH_PARAMS *p = &list[0];
    uint64_t sig = vgpu_signature(p->function, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX,
                                  p->blockDimY, p->blockDimZ, n);
    CUresult rc = vgpu_launch_begin(&l, p->hStream, 0, sig);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(list, n, flags);
    vgpu_launch_end(&l, rc);
    return rc;
}

static CUresult graph(graph_fn real, int ptsz, CUgraphExec exec, CUstream stream)
{
    vgpu_launch l;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_launch_begin(&l, stream, ptsz, vgpu_graph_signature(exec));
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(exec, stream);
    vgpu_launch_end(&l, rc);
    return rc;
}

VGPU_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    return graph(REAL_CU(graph_fn, cuGraphLaunch), 0, exec, stream);
}

VGPU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream)
{
    return graph(REAL_CU(graph_fn, cuGraphLaunch_ptsz), 1, exec, stream);
}

typedef CUresult (*grid_fn)(CUfunction, int, int, CUstream);
typedef CUresult (*grid_sync_fn)(CUfunction, int, int);
typedef CUresult (*single_fn)(CUfunction);

/* The block shape was set earlier by cuFuncSetBlockShape, so the grid and function identify it. */
static CUresult legacy_begin(vgpu_launch *l, void *real, CUfunction f, int w, int h,
                             CUstream stream)
{
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_launch_begin(l, stream, 0,
                             vgpu_signature(f, (unsigned)w, (unsigned)h, 1, 0, 0, 0, 0));
}

VGPU_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int w, int h, CUstream stream)
{
    grid_fn real = REAL_CU(grid_fn, cuLaunchGridAsync);
    vgpu_launch l;
    CUresult rc = legacy_begin(&l, (void *)real, f, w, h, stream);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(f, w, h, stream);
    vgpu_launch_end(&l, rc);
    return rc;
}

VGPU_EXPORT CUresult cuLaunchGrid(CUfunction f, int w, int h)
{
    grid_sync_fn real = REAL_CU(grid_sync_fn, cuLaunchGrid);
    vgpu_launch l;
    CUresult rc = legacy_begin(&l, (void *)real, f, w, h, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(f, w, h);
    vgpu_launch_end(&l, rc);
    return rc;
}

VGPU_EXPORT CUresult cuLaunch(CUfunction f)
{
    single_fn real = REAL_CU(single_fn, cuLaunch);
    vgpu_launch l;
    CUresult rc = legacy_begin(&l, (void *)real, f, 1, 1, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(f);
    vgpu_launch_end(&l, rc);
    return rc;
}
