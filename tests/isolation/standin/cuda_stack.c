/* Stand-in libcuda.so.1: the thread's stack of current contexts, and which context a stream
 * belongs to.
 *
 * CUDA Driver API reference, Context Management: cuCtxPushCurrent "Pushes the given context ctx
 * onto the CPU thread's stack of current contexts. The specified context becomes the CPU thread's
 * current context"; cuCtxPopCurrent "Pops the current CUDA context from the CPU thread and passes
 * back the old context handle in *pctx. ... The CUDA context that was current to the CPU thread
 * before cuCtxPushCurrent() was called is made current"; cuCtxSetCurrent replaces the top of the
 * stack. So the current context (cuda_core.c) is the top, and this stack holds what is below it.
 *
 * Stream Management, cuStreamGetCtx: "Returns the CUDA context that the stream is associated
 * with"; for the NULL stream, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD it is the context current
 * to the calling thread. */
#include "cuda_local.h"

#define SI_STACK 16

SI_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx); /* cuda_core.c */
SI_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx);

static __thread CUcontext below[SI_STACK];
static __thread int depth;

SI_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    CUcontext top = NULL;
    if (!ctx || depth == SI_STACK)
        return CUDA_ERROR_INVALID_VALUE;
    cuCtxGetCurrent(&top);
    CUresult rc = cuCtxSetCurrent(ctx);
    if (rc == CUDA_SUCCESS)
        below[depth++] = top;
    return rc;
}

SI_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
    CUcontext top = NULL;
    cuCtxGetCurrent(&top);
    if (!top)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx)
        *pctx = top;
    return cuCtxSetCurrent(depth ? below[--depth] : NULL);
}

SI_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }
SI_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx) { return cuCtxPopCurrent_v2(pctx); }

SI_EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx) {
    struct si_stream *st = si_cu_stream(s);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!st)
        return CUDA_ERROR_INVALID_CONTEXT;
    *pctx = st->ctx;
    return CUDA_SUCCESS;
}
