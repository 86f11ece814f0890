/* cuStreamIsCapturing tells whether a launch's work is captured (then nothing may be recorded on
 * its stream: the work does not run, and events recorded there become captured events, which no
 * mode allows to query). cuThreadExchangeStreamCaptureMode, in the push-pop fashion its
 * documentation recommends, lets our queries and syncs run while a GLOBAL or THREAD_LOCAL capture
 * is under way on this or another thread, which would otherwise prohibit them and invalidate the
 * capture (CUDA Programming Guide, stream capture). */
#include "capture.h"

#include "hooks.h"

typedef CUresult (*capturing_fn)(CUstream, int *);
typedef CUresult (*exchange_fn)(int *);
typedef CUresult (*info_fn)(CUstream, int *, unsigned long long *, CUgraph *, const void **,
                            size_t *);

enum { CAPTURE_STATUS_ACTIVE = 1 };

int vgpu_capture_relax(void)
{
    exchange_fn exchange = REAL_CU(exchange_fn, cuThreadExchangeStreamCaptureMode);
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    return exchange && exchange(&mode) == CUDA_SUCCESS ? mode : -1;
}

void vgpu_capture_unrelax(int mode)
{
    exchange_fn exchange = REAL_CU(exchange_fn, cuThreadExchangeStreamCaptureMode);
    if (mode >= 0 && exchange)
        exchange(&mode);
}

int vgpu_capture_active(CUstream stream)
{
    capturing_fn is_capturing = REAL_CU(capturing_fn, cuStreamIsCapturing);
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!is_capturing)
        return 0;
    CUresult rc = is_capturing(stream, &status);
    if (rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        return 1; /* the legacy stream while a blocking stream captures: the launch is refused */
    return rc == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* cuStreamGetCaptureInfo_v2 (CUDA 11.3; graph memory nodes need 11.4): the status, the capture
 * sequence's id and "the graph being captured into". */
CUgraph vgpu_capture_graph(CUstream stream, unsigned long long *id)
{
    info_fn info = REAL_CU(info_fn, cuStreamGetCaptureInfo_v2);
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph graph = NULL;
    *id = 0;
    if (!info || info(stream, &status, id, &graph, NULL, NULL) != CUDA_SUCCESS)
        return NULL;
    return status == CAPTURE_STATUS_ACTIVE ? graph : NULL;
}

unsigned long long vgpu_capture_id(CUstream stream)
{
    info_fn info = REAL_CU(info_fn, cuStreamGetCaptureInfo_v2);
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    if (!info || info(stream, &status, &id, NULL, NULL, NULL) != CUDA_SUCCESS)
        return 0;
    return status == CU_STREAM_CAPTURE_STATUS_NONE ? 0 : id;
}
