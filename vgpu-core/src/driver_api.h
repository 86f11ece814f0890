/* The few CUDA driver API and NVML types and prototypes vgpu-core touches, declared from NVIDIA's
 * public API documentation (CUDA Driver API reference, NVML reference) so that no NVIDIA header is
 * needed to build. Only the ABI matters here: handles are opaque pointers, sizes are size_t, and
 * device pointers are 64-bit. */
#ifndef VGPU_DRIVER_API_H
#define VGPU_DRIVER_API_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct vgpu_ctx *CUcontext;
typedef struct vgpu_stream *CUstream;
typedef struct vgpu_green_ctx *CUgreenCtx;
typedef struct vgpu_event *CUevent;
typedef struct vgpu_function *CUfunction;
typedef struct vgpu_graph *CUgraph;
typedef struct vgpu_graph_exec *CUgraphExec;
typedef struct vgpu_pool *CUmemoryPool;
typedef struct vgpu_array *CUarray;
typedef struct vgpu_mipmap *CUmipmappedArray;
/* cuCtxCreate_v3's CUexecAffinityParam array and cuCtxCreate_v4's CUctxCreateParams: passed to
 * the driver untouched, so their layout does not matter here. */
typedef struct vgpu_exec_affinity CUexecAffinityParam;
typedef struct vgpu_ctx_create_params CUctxCreateParams;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
};

/* CUipcMemHandle: 64 opaque bytes (CU_IPC_HANDLE_SIZE), passed by value. */
typedef struct {
    char reserved[64];
} CUipcMemHandle;

/* cuArrayCreate_v2's descriptor. */
typedef struct {
    size_t Width;
    size_t Height;
    int Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

/* cuArray3DCreate_v2's and cuMipmappedArrayCreate's descriptor. */
typedef struct {
    size_t Width;
    size_t Height;
    size_t Depth;
    int Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* cuMemCreate's allocation properties (only the location is read). */
typedef struct {
    int type;
    int id;
} CUmemLocation;
enum { CU_MEM_LOCATION_TYPE_DEVICE = 1, CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN = 6 };

/* 1 with the device's ordinal in *dev when `loc` names device memory: a device, or (CUDA 13.4)
 * one of its locality domains, "a portion of device memory", whose `id` is CUmemLocation's
 * `localized` member (the device ordinal in its first byte, the domain in its second). 0 for the
 * host and any other location. */
static inline int vgpu_location_device(CUmemLocation loc, CUdevice *dev)
{
    unsigned char localized[sizeof loc.id];
    __builtin_memcpy(localized, &loc.id, sizeof localized);
    if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE &&
        loc.type != CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN)
        return 0;
    *dev = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? loc.id : localized[0];
    return 1;
}

typedef struct {
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;

/* cuMemPoolCreate's pool properties (only the location is read). */
typedef struct {
    int allocType;
    int handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

/* cuLaunchKernelEx's configuration (only the stream is read). */
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    void *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

/* cuLaunchCooperativeKernelMultiDevice's per-device parameters. */
typedef struct {
    CUfunction function;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    void **kernelParams;
} CUDA_LAUNCH_PARAMS;

/* Stream capture (cuStreamIsCapturing, cuThreadExchangeStreamCaptureMode). */
enum { CU_STREAM_CAPTURE_STATUS_NONE = 0 };
enum { CU_STREAM_CAPTURE_MODE_RELAXED = 2 };

/* NVML */
typedef int nvmlReturn_t;
typedef struct vgpu_nvml_device *nvmlDevice_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
};

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

#endif
