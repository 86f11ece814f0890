/* Virtual memory management: physical memory is counted from cuMemCreate until the driver really
 * frees it. CUDA Driver API reference, cuMemRelease: the allocation "will be freed when all
 * outstanding mappings to the memory are unmapped and when all outstanding references to the
 * handle ... are also released"; cuMemUnmap frees it "if there are no existing mappings and there
 * are no unreleased memory handles". So each handle we created keeps a reference count
 * (cuMemCreate and cuMemRetainAllocationHandle add one, cuMemRelease takes one) and a mapping
 * count, and its bytes are given back when both reach 0: NVIDIA's own sample pattern (create,
 * map, release at once, use, unmap) stays counted while the memory is in use. Memory created on
 * the host (a non-device location) is not device memory and passes uncounted. The driver is
 * called under the table's mutex so a mapping and its count change together. */
#include <pthread.h>
#include <stdlib.h>

#include "account.h"
#include "allocs.h"
#include "hooks.h"
#include "state.h"

typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *, void *);

typedef struct {
    CUmemGenericAllocationHandle handle;
    uint64_t bytes;
    int index; /* limits index of the allocation's location */
    int refs;
    int maps;
} vmm_handle;

typedef struct {
    CUdeviceptr ptr;
    size_t size;
    CUmemGenericAllocationHandle handle;
} vmm_map;

static vmm_handle *handles;
static size_t nhandles, caphandles;
static vmm_map *maps;
static size_t nmaps, capmaps;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

#define MISSING(fn) if (!(fn)) return CUDA_ERROR_NOT_INITIALIZED

static vmm_handle *find(CUmemGenericAllocationHandle handle)
{
    for (size_t i = 0; i < nhandles; i++)
        if (handles[i].handle == handle)
            return &handles[i];
    return NULL;
}

/* Gives the bytes back once the driver has freed them (no reference and no mapping left). */
static void settle(vmm_handle *h)
{
    if (h->refs > 0 || h->maps > 0)
        return;
    vgpu_unreserve(h->index, h->bytes);
    *h = handles[--nhandles];
}

void vgpu_vmm_forget(void)
{
    /* In a forked child: the parent's handles and mappings are not the child's. */
    nhandles = 0;
    nmaps = 0;
    pthread_mutex_init(&mu, NULL);
}

VGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
                                 const CUmemAllocationProp *prop, unsigned long long flags)
{
    create_fn real = REAL_CU(create_fn, cuMemCreate);
    release_fn real_release = REAL_CU(release_fn, cuMemRelease);
    int index;
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return real(handle, bytes, prop, flags);
    CUresult rc = vgpu_device_index(prop->location.id, &index);
    if (rc == CUDA_SUCCESS)
        rc = vgpu_reserve(index, bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&mu);
    rc = real(handle, bytes, prop, flags);
    if (rc == CUDA_SUCCESS && vgpu_grow((void **)&handles, &caphandles, nhandles, sizeof *handles)) {
        if (real_release)
            real_release(*handle); /* an allocation we could not track is not handed out */
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        handles[nhandles++] = (vmm_handle){*handle, bytes, index, 1, 0};
    pthread_mutex_unlock(&mu);
    if (rc != CUDA_SUCCESS)
        vgpu_unreserve(index, bytes);
    return rc;
}

VGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    release_fn real = REAL_CU(release_fn, cuMemRelease);
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(handle);
    vmm_handle *h = rc == CUDA_SUCCESS ? find(handle) : NULL;
    if (h && h->refs > 0) {
        h->refs--;
        settle(h);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

VGPU_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    retain_fn real = REAL_CU(retain_fn, cuMemRetainAllocationHandle);
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(handle, addr);
    vmm_handle *h = rc == CUDA_SUCCESS && handle ? find(*handle) : NULL;
    if (h)
        h->refs++;
    pthread_mutex_unlock(&mu);
    return rc;
}

VGPU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    map_fn real = REAL_CU(map_fn, cuMemMap);
    unmap_fn real_unmap = REAL_CU(unmap_fn, cuMemUnmap);
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(ptr, size, offset, handle, flags);
    vmm_handle *h = rc == CUDA_SUCCESS ? find(handle) : NULL;
    if (h && vgpu_grow((void **)&maps, &capmaps, nmaps, sizeof *maps)) {
        if (real_unmap)
            real_unmap(ptr, size); /* an untracked mapping would outlive its count */
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (h) {
        maps[nmaps++] = (vmm_map){ptr, size, handle};
        h->maps++;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* cuMemUnmap takes the entire range that was mapped, which may hold several mappings. */
VGPU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    unmap_fn real = REAL_CU(unmap_fn, cuMemUnmap);
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(ptr, size);
    for (size_t i = 0; rc == CUDA_SUCCESS && i < nmaps;) {
        if (maps[i].ptr < ptr || maps[i].ptr - ptr >= size) {
            i++;
            continue;
        }
        vmm_handle *h = find(maps[i].handle);
        maps[i] = maps[--nmaps];
        if (h) {
            h->maps--;
            settle(h);
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
