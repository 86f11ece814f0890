/* Stand-in libcuda.so.1: error strings and `cuGetProcAddress`, answered from the library's own
 * table (as the CUDA runtime reaches the driver since CUDA 11.3).
 *
 * A variant that lacks functions is built with -DSI_OMIT="\"name other\"" plus a linker version
 * script hiding those symbols (tests/isolation/standins.py does both): the table then answers
 * "not found" for them, as an older driver would. */
#include <stdio.h>
#include <string.h>

#include "cuda_local.h"

#ifndef SI_OMIT
#define SI_OMIT ""
#endif

#define SI_CUDA_SYMBOLS(X)                                                                       \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)       \
    X(cuDeviceGetUuid) X(cuDeviceGetUuid_v2) X(cuDeviceTotalMem_v2) X(cuDeviceGetAttribute)     \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxRelease_v2)    \
    X(cuCtxCreate) X(cuCtxCreate_v2) X(cuCtxCreate_v3) X(cuCtxCreate_v4)                        \
    X(cuCtxDestroy_v2) X(cuCtxSetCurrent) X(cuCtxGetCurrent)                                    \
    X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuMemAlloc_v2) X(cuMemAllocPitch_v2)                \
    X(cuMemAllocManaged) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemFreeAsync)                   \
    X(cuMemAllocAsync_ptsz) X(cuMemAllocFromPoolAsync_ptsz)                                     \
    X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemAllocFromPoolAsync) X(cuMemCreate)            \
    X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemAddressReserve) X(cuMemAddressFree)        \
    X(cuMemGetAllocationGranularity) X(cuArrayCreate_v2) X(cuArray3DCreate_v2)                  \
    X(cuArrayDestroy) X(cuMipmappedArrayCreate) X(cuMipmappedArrayDestroy) X(cuMemGetInfo_v2)   \
    X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleUnload) X(cuLaunchKernel)              \
    X(cuLibraryLoadData) X(cuLibraryGetKernel) X(cuLibraryUnload) X(cuDeviceGetDevResource)    \
    X(cuDevResourceGenerateDesc) X(cuGreenCtxCreate) X(cuCtxFromGreenCtx)                       \
    X(cuGreenCtxStreamCreate) X(cuGreenCtxDestroy)                                              \
    X(cuLaunchKernelEx) X(cuLaunchCooperativeKernel) X(cuStreamCreate) X(cuStreamSynchronize)   \
    X(cuStreamDestroy) X(cuStreamDestroy_v2) X(cuEventCreate) X(cuEventRecord) X(cuEventQuery)  \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy) X(cuEventDestroy_v2)          \
    X(cuGraphCreate) X(cuGraphAddKernelNode) X(cuGraphAddKernelNode_v2) X(cuGraphInstantiate)   \
    X(cuGraphInstantiate_v2) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch)                    \
    X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuGetErrorString) X(cuGetErrorName)               \
    X(cuGetProcAddress) X(cuGetProcAddress_v2) X(cuMemRetainAllocationHandle)                   \
    X(cuMemGetAllocationPropertiesFromHandle) X(cuMemSetAccess) X(cuDeviceGetDefaultMemPool)     \
    X(cuDeviceGetMemPool) X(cuDeviceSetMemPool) X(cuMemGetDefaultMemPool) X(cuMemGetMemPool)     \
    X(cuMemPoolSetAttribute) X(cuMemPoolGetAttribute)                                           \
    X(cuMemPoolTrimTo) X(cuGraphAddMemAllocNode) X(cuGraphAddMemFreeNode) X(cuDeviceGraphMemTrim) \
    X(cuDeviceGetGraphMemAttribute) X(cuMemAlloc) X(cuGraphAddNode) X(cuGraphAddNode_v2)           \
    X(cuGraphExecUpdate) X(cuGraphExecUpdate_v2) X(cuGraphExecKernelNodeSetParams)              \
    X(cuGraphExecKernelNodeSetParams_v2) X(cuGraphExecNodeSetParams)                            \
    X(cuGraphExecChildGraphNodeSetParams)                                                       \
    X(cuDevicePrimaryCtxReset)                                                                  \
    X(cuDevicePrimaryCtxReset_v2) X(cuDevicePrimaryCtxGetState) X(cuStreamBeginCapture)         \
    X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)                   \
    X(cuStreamBeginRecaptureToGraph)                                                            \
    X(cuStreamIsCapturing)                                                                      \
    X(cuStreamGetCaptureInfo) X(cuStreamGetCaptureInfo_v2) X(cuThreadExchangeStreamCaptureMode) \
    X(cuMemsetD8_v2) X(cuMemsetD16_v2) X(cuMemsetD32_v2) X(cuMemsetD8Async) X(cuMemsetD16Async) \
    X(cuMemsetD32Async) X(cuMemsetD2D8_v2) X(cuMemsetD2D16_v2) X(cuMemsetD2D32_v2)              \
    X(cuMemsetD2D8Async) X(cuMemsetD2D16Async) X(cuMemsetD2D32Async) X(cuFuncSetBlockShape)     \
    X(cuParamSetSize) X(cuParamSetv) X(cuLaunch) X(cuLaunchGrid) X(cuLaunchGridAsync)            \
    X(cuCtxPushCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent) X(cuCtxPopCurrent_v2)         \
    X(cuStreamGetCtx) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)        \
    X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcOpenMemHandle_v2) X(cuIpcCloseMemHandle)  \
    X(cuMemGetAddressRange_v2) X(cuPointerGetAttribute) X(cuCtxSetLimit) X(cuCtxGetLimit)     \
    X(cuMemPrefetchAsync) X(cuMemPrefetchAsync_v2) X(cuMemAdvise) X(cuMemAdvise_v2)

#define SI_DECLARE(name) CUresult name();
SI_CUDA_SYMBOLS(SI_DECLARE)
#undef SI_DECLARE

struct entry {
    const char *name;
    void *fn;
};

#define SI_ENTRY(name) {#name, (void *)name},
static const struct entry table[] = {SI_CUDA_SYMBOLS(SI_ENTRY){NULL, NULL}};
#undef SI_ENTRY

/* Base names whose newest form is not simply base + "_v2", with the CUDA version since which. */
static const struct {
    const char *base, *name;
    int since;
} versioned[] = {
    {"cuGetProcAddress", "cuGetProcAddress_v2", 12000},
    {"cuDeviceGetUuid", "cuDeviceGetUuid_v2", 11040},
    {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000},
    {"cuGraphAddKernelNode", "cuGraphAddKernelNode_v2", 12030},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000},
    {"cuMemAlloc", "cuMemAlloc_v2", 3020}, /* below 3020: the 32-bit v1 function */
    {"cuGraphAddNode", "cuGraphAddNode_v2", 12030},
    {"cuGraphExecUpdate", "cuGraphExecUpdate_v2", 12000},
    {"cuGraphExecKernelNodeSetParams", "cuGraphExecKernelNodeSetParams_v2", 12000},
    {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 11000},
    {"cuStreamBeginCapture", "cuStreamBeginCapture_v2", 10010},
    {"cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2", 11030},
    {"cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", 11000},
    /* newest first: the first form whose version the caller reaches is the answer */
    {"cuCtxCreate", "cuCtxCreate_v4", 12050},
    {"cuCtxCreate", "cuCtxCreate_v3", 11040},
    {"cuCtxCreate", "cuCtxCreate_v2", 3020}, /* below 3020: cuCtxCreate itself */
    {"cuMemPrefetchAsync", "cuMemPrefetchAsync_v2", 12020},
    {"cuMemAdvise", "cuMemAdvise_v2", 12020},
    {NULL, NULL, 0},
};

int si_cu_omitted(const char *name) {
    const char *list = SI_OMIT;
    size_t len = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if ((p == list || p[-1] == ' ') && (p[len] == '\0' || p[len] == ' '))
            return 1;
    return 0;
}

static void *exact(const char *name) {
    if (si_cu_omitted(name))
        return NULL;
    for (const struct entry *e = table; e->name; e++)
        if (strcmp(e->name, name) == 0)
            return e->fn;
    return NULL;
}

static void *lookup(const char *base, int version) {
    char v2[128];
    int special = 0;
    for (int i = 0; versioned[i].base; i++) {
        if (strcmp(versioned[i].base, base) != 0)
            continue;
        special = 1;
        if (version >= versioned[i].since && exact(versioned[i].name))
            return exact(versioned[i].name);
    }
    snprintf(v2, sizeof(v2), "%s_v2", base);
    if (!special && exact(v2))
        return exact(v2);
    return exact(base);
}

SI_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                       cuuint64_t flags, int *status) {
    (void)flags;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = lookup(symbol, version);
    if (status)
        *status = *pfn ? 0 : 1; /* CU_GET_PROC_ADDRESS_SUCCESS / _SYMBOL_NOT_FOUND */
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

SI_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

static const struct {
    int code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in the present state"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
};

static int error_index(CUresult rc) {
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].code == rc)
            return (int)i;
    return -1;
}

SI_EXPORT CUresult cuGetErrorString(CUresult rc, const char **out) {
    int i = error_index(rc);
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = i < 0 ? NULL : errors[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGetErrorName(CUresult rc, const char **out) {
    int i = error_index(rc);
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = i < 0 ? NULL : errors[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
