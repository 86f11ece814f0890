/* NVML types, declared here from NVIDIA's public NVML API reference (no NVIDIA header used). */
#ifndef VGPU_STANDIN_NVML_LOCAL_H
#define VGPU_STANDIN_NVML_LOCAL_H

#include "standin.h"

typedef int nvmlReturn_t;
typedef struct si_nvdev *nvmlDevice_t;
typedef struct si_evset *nvmlEventSet_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define NVML_EVENT_XID_CRITICAL 0x8ull
#define NVML_NVLINK_MAX_LINKS 18

typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

#define NVML_MEMORY_V2 (unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24))

typedef struct {
    unsigned gpu, memory;
} nvmlUtilization_t;

typedef struct { /* nvmlProcessInfo_t (v2 and v3 share it) */
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    unsigned pid;
    unsigned long long timeStamp;
    unsigned smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

/* nvmlSetMemoryLimits_v1_t / nvmlGetMemoryLimits_v1_t (NVML reference, "Structs"): the cgroup's
 * full sysfs path, then the limits in bytes; no version field. */
typedef struct {
    const char *nameSpace;
    unsigned long long softLimit, hardLimit;
} nvmlSetMemoryLimits_v1_t;

typedef struct {
    const char *nameSpace;
    unsigned long long softLimit, hardLimit, currentUsed;
} nvmlGetMemoryLimits_v1_t;

/* "To clear the limits, set softLimit to 0, and hardLimit to NVML_DEVICE_MEMORY_LIMIT_MAX": the
 * reference names the constant; its value here (all ones) is an assumption. */
#define NVML_DEVICE_MEMORY_LIMIT_MAX (~0ull)

struct si_nvdev {
    int index;
};

SI_HIDDEN struct si_node *si_nv_node(nvmlReturn_t *rc);
SI_HIDDEN nvmlReturn_t si_nv_dev(nvmlDevice_t d, struct si_node **n, int *index);
SI_HIDDEN nvmlDevice_t si_nv_handle(int index);

#endif
