/* The driver and NVML entry points vgpu-core answers (hooks) or calls (used), listed once so the
 * symbol table, the lookup by dlsym/cuGetProcAddress and the real-function table agree. */
#ifndef VGPU_HOOKS_H
#define VGPU_HOOKS_H

#define VGPU_EXPORT __attribute__((visibility("default")))
/* dlsym runs inside the AddressSanitizer runtime's own start-up (it looks up what it intercepts)
 * before shadow memory exists, so the lookup path is never instrumented for it. */
#define VGPU_NO_ASAN __attribute__((no_sanitize_address))

#define VGPU_CUDA_HOOKS(X)                                                                        \
    X(cuInit) X(cuGetProcAddress) X(cuGetProcAddress_v2) X(cuMemAlloc_v2) X(cuMemAllocPitch_v2)   \
    X(cuMemAllocManaged) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)               \
    X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync)                  \
    X(cuMemFreeAsync_ptsz) X(cuMemCreate) X(cuMemRelease) X(cuArrayCreate_v2)                     \
    X(cuArray3DCreate_v2) X(cuArrayDestroy) X(cuMipmappedArrayCreate) X(cuMipmappedArrayDestroy)  \
    X(cuMemGetInfo_v2) X(cuDeviceTotalMem_v2) X(cuLaunchKernel) X(cuLaunchKernel_ptsz)            \
    X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel)                     \
    X(cuLaunchCooperativeKernel_ptsz) X(cuLaunchCooperativeKernelMultiDevice) X(cuGraphLaunch)    \
    X(cuGraphLaunch_ptsz) X(cuCtxCreate_v2) X(cuDevicePrimaryCtxRetain) X(cuMemMap)              \
    X(cuMemUnmap) X(cuMemRetainAllocationHandle) X(cuMemAlloc) X(cuMemAllocPitch)                 \
    X(cuArrayCreate) X(cuArray3DCreate) X(cuMemGetInfo) X(cuDeviceTotalMem) X(cuMemPoolCreate)    \
    X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool) X(cuMemPoolTrimTo) X(cuMemPoolDestroy)     \
    X(cuGraphAddMemAllocNode) X(cuGraphDestroy) X(cuDeviceGraphMemTrim) X(cuGraphAddNode)         \
    X(cuGraphAddNode_v2) X(cuCtxDestroy_v2) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)      \
    X(cuDevicePrimaryCtxReset) X(cuDevicePrimaryCtxReset_v2) X(cuDevicePrimaryCtxRelease)         \
    X(cuDevicePrimaryCtxRelease_v2) X(cuLaunch) X(cuLaunchGrid) X(cuLaunchGridAsync)              \
    X(cuMemsetD8_v2) X(cuMemsetD16_v2) X(cuMemsetD32_v2) X(cuMemsetD2D8_v2) X(cuMemsetD2D16_v2)   \
    X(cuMemsetD2D32_v2) X(cuMemsetD8_v2_ptds) X(cuMemsetD16_v2_ptds) X(cuMemsetD32_v2_ptds)       \
    X(cuMemsetD2D8_v2_ptds) X(cuMemsetD2D16_v2_ptds) X(cuMemsetD2D32_v2_ptds) X(cuMemsetD8Async)  \
    X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemsetD2D8Async) X(cuMemsetD2D16Async)            \
    X(cuMemsetD2D32Async) X(cuMemsetD8Async_ptsz) X(cuMemsetD16Async_ptsz)                        \
    X(cuMemsetD32Async_ptsz) X(cuMemsetD2D8Async_ptsz) X(cuMemsetD2D16Async_ptsz)                 \
    X(cuMemsetD2D32Async_ptsz) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle) \
    X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcOpenMemHandle_v2) X(cuIpcCloseMemHandle)\
    X(cuCtxSetLimit) X(cuGreenCtxDestroy) X(cuCtxCreate) X(cuCtxCreate_v3) X(cuCtxCreate_v4)      \
    X(cuMemPrefetchAsync) X(cuMemPrefetchAsync_ptsz) X(cuMemPrefetchAsync_v2)                     \
    X(cuMemPrefetchAsync_v2_ptsz) X(cuMemAdvise) X(cuMemAdvise_v2) X(cuGraphExecDestroy)          \
    X(cuGraphExecUpdate) X(cuGraphExecUpdate_v2) X(cuGraphExecKernelNodeSetParams)                \
    X(cuGraphExecKernelNodeSetParams_v2) X(cuGraphExecNodeSetParams)                              \
    X(cuGraphExecChildGraphNodeSetParams) X(cuGraphExecMemsetNodeSetParams)                       \
    X(cuGraphExecMemcpyNodeSetParams) X(cuGraphExecHostNodeSetParams)                             \
    X(cuGraphExecEventRecordNodeSetEvent) X(cuGraphExecEventWaitNodeSetEvent)                     \
    X(cuGraphExecExternalSemaphoresSignalNodeSetParams)                                           \
    X(cuGraphExecExternalSemaphoresWaitNodeSetParams) X(cuGraphExecBatchMemOpNodeSetParams)       \
    X(cuGraphNodeSetEnabled) X(cuMemGetDefaultMemPool) X(cuMemGetMemPool)                         \
    X(cuStreamBeginRecaptureToGraph)

#define VGPU_CUDA_USED(X)                                                                         \
    X(cuDeviceGetUuid) X(cuDeviceGetUuid_v2) X(cuCtxGetDevice) X(cuCtxGetCurrent)                 \
    X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize)                       \
    X(cuEventElapsedTime) X(cuMemPoolGetAttribute) X(cuDeviceGetGraphMemAttribute)                 \
    X(cuEventDestroy_v2) X(cuStreamIsCapturing)                             \
    X(cuThreadExchangeStreamCaptureMode) X(cuStreamSynchronize) X(cuDevicePrimaryCtxGetState)    \
    X(cuStreamGetCtx) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) X(cuStreamGetCaptureInfo_v2) \
    X(cuMemGetAllocationPropertiesFromHandle) X(cuMemGetAddressRange_v2) X(cuPointerGetAttribute)\
    X(cuCtxGetLimit) X(cuDeviceGetAttribute) X(cuCtxFromGreenCtx)

#define VGPU_NVML_HOOKS(X)                                                                        \
    X(nvmlInit) X(nvmlInit_v2) X(nvmlInitWithFlags) X(nvmlDeviceGetMemoryInfo)                    \
    X(nvmlDeviceGetMemoryInfo_v2)

#define VGPU_NVML_USED(X) X(nvmlDeviceGetUUID)

#define VGPU_ENUM(name) VGPU_##name,
enum { VGPU_CUDA_HOOKS(VGPU_ENUM) VGPU_CUDA_USED(VGPU_ENUM) VGPU_CUDA_COUNT };
enum { VGPU_NVML_HOOKS(VGPU_ENUM) VGPU_NVML_USED(VGPU_ENUM) VGPU_NVML_COUNT };

/* The real driver's function (NULL if the driver lacks it); loads libcuda.so.1 on first use. */
void *vgpu_real_cuda(int index);
/* The real NVML function; loads libnvidia-ml.so.1 on first use. */
void *vgpu_real_nvml(int index);
/* glibc's own dlsym, never ours. */
VGPU_NO_ASAN void *vgpu_real_dlsym(void *handle, const char *name);
typedef void *(*vgpu_dlsym_fn)(void *, const char *);
/* glibc's dlsym itself (for a tail call that keeps the caller's return address). */
VGPU_NO_ASAN vgpu_dlsym_fn vgpu_glibc_dlsym(void);

/* Our hook for a real driver function pointer the driver handed out, or the pointer itself. */
void *vgpu_hook_for_real(void *real);
/* Our hook for a symbol name, or NULL when the name is not hooked. */
VGPU_NO_ASAN void *vgpu_hook_for_name(const char *name);

typedef void *(*vgpu_dlopen_fn)(const char *, int);
/* glibc's dlopen itself (for a tail call that keeps the caller's return address). */
VGPU_NO_ASAN vgpu_dlopen_fn vgpu_glibc_dlopen(void);

#define REAL_CU(type, name) ((type)vgpu_real_cuda(VGPU_##name))
#define REAL_NVML(type, name) ((type)vgpu_real_nvml(VGPU_##name))

#endif
