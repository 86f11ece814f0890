/* NVML as the container sees it: initialisation refused without a valid grant, and each listed
 * GPU's memory reported as the grant (nvidia-smi and frameworks read it here). A GPU that is not
 * listed answers "not found" for its memory. */
#include <string.h>

#include "hooks.h"
#include "state.h"

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*init_flags_fn)(unsigned int);
typedef nvmlReturn_t (*mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*mem2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef nvmlReturn_t (*uuid_fn)(nvmlDevice_t, char *, unsigned int);

VGPU_EXPORT nvmlReturn_t nvmlInit(void)
{
    init_fn real = REAL_NVML(init_fn, nvmlInit);
    if (!vgpu_state_get())
        return NVML_ERROR_NO_PERMISSION;
    return real ? real() : NVML_ERROR_NOT_FOUND;
}

VGPU_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    init_fn real = REAL_NVML(init_fn, nvmlInit_v2);
    if (!vgpu_state_get())
        return NVML_ERROR_NO_PERMISSION;
    return real ? real() : NVML_ERROR_NOT_FOUND;
}

VGPU_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    init_flags_fn real = REAL_NVML(init_flags_fn, nvmlInitWithFlags);
    if (!vgpu_state_get())
        return NVML_ERROR_NO_PERMISSION;
    return real ? real(flags) : NVML_ERROR_NOT_FOUND;
}

/* The limits index of an NVML device, by its UUID; -1 when it is not listed. */
static int nvml_index(nvmlDevice_t dev)
{
    const vgpu_state *s = vgpu_state_get();
    uuid_fn real = REAL_NVML(uuid_fn, nvmlDeviceGetUUID);
    char uuid[96];
    if (!s || !real || real(dev, uuid, sizeof uuid) != NVML_SUCCESS)
        return -1;
    if (strlen(uuid) < 4 + VGPU_UUID_HEX_LEN)
        return -1;
    return vgpu_limits_find(&s->limits, uuid + 4);
}

/* Fills total/free/used from the grant; the device's own free bounds what is free. */
static nvmlReturn_t grant_view(nvmlDevice_t dev, unsigned long long *total,
                               unsigned long long *free_bytes, unsigned long long *used)
{
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return NVML_ERROR_NO_PERMISSION;
    int index = nvml_index(dev);
    if (index < 0)
        return NVML_ERROR_NOT_FOUND;
    uint64_t limit = s->limits.dev[index].memory;
    uint64_t in_use = vgpu_region_used(s->region, index);
    uint64_t left = in_use < limit ? limit - in_use : 0;
    *total = limit;
    *used = in_use < limit ? in_use : limit;
    *free_bytes = left < *free_bytes ? left : *free_bytes;
    return NVML_SUCCESS;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *memory)
{
    mem_fn real = REAL_NVML(mem_fn, nvmlDeviceGetMemoryInfo);
    if (!real)
        return NVML_ERROR_NOT_FOUND;
    nvmlReturn_t rc = real(dev, memory);
    if (rc != NVML_SUCCESS || !memory)
        return rc;
    return grant_view(dev, &memory->total, &memory->free, &memory->used);
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *memory)
{
    mem2_fn real = REAL_NVML(mem2_fn, nvmlDeviceGetMemoryInfo_v2);
    if (!real)
        return NVML_ERROR_NOT_FOUND;
    nvmlReturn_t rc = real(dev, memory);
    if (rc != NVML_SUCCESS || !memory)
        return rc;
    memory->reserved = 0;
    return grant_view(dev, &memory->total, &memory->free, &memory->used);
}
