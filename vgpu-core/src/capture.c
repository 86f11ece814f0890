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
