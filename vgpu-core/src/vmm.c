/* Virtual memory management: physical memory is counted from cuMemCreate until the driver really
 * frees it. CUDA Driver API reference, cuMemRelease: the allocation "will be freed when all
 * outstanding mappings to the memory are unmapped and when all outstanding references to the
 * handle ... are also released"; cuMemUnmap frees it "if there are no existing mappings and there
 * are no unreleased memory handles". So each handle we created keeps a reference count
 * (cuMemCreate and cuMemRetainAllocationHandle add one, cuMemRelease takes one) and a mapping
 * count, and its bytes are given back when both reach 0: NVIDIA's own sample pattern (create,
 * map, release at once, use, unmap) stays counted while the memory is in use. Memory created on
 * the host (a non-device location) is not device memory and passes uncounted. The driver is
 * called under the table's mutex so a mapping and its count change together. Exporting and
 * importing a handle (sharing it among processes) is vmmshare.c, over this table (vmm.h). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "account.h"
#include "allocs.h"
#include "hooks.h"
#include "shares.h"
#include "state.h"
#include "vmm.h"

typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *, void *);

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

vmm_handle *vgpu_vmm_find(CUmemGenericAllocationHandle handle)
{
    for (size_t i = 0; i < nhandles; i++)
        if (handles[i].handle == handle)
            return &handles[i];
    return NULL;
}

vmm_handle *vgpu_vmm_new(void)
{
    if (vgpu_grow((void **)&handles, &caphandles, nhandles, sizeof *handles))
        return NULL;
    return &handles[nhandles++];
}

void vgpu_vmm_lock(void)
{
    pthread_mutex_lock(&mu);
}

void vgpu_vmm_unlock(void)
{
    pthread_mutex_unlock(&mu);
}

/* Gives the bytes back once this process holds the memory no more (no reference and no mapping
 * left): its slot's count, or its part in a shared entry unless another handle here holds it. */
static void settle(vmm_handle *h)
{
    if (h->refs > 0 || h->maps > 0)
        return;
    int others = 0;
    for (size_t i = 0; h->entry >= 0 && i < nhandles; i++)
        others |= &handles[i] != h && handles[i].entry == h->entry;
    if (h->entry < 0)
        vgpu_unreserve(h->index, h->bytes);
    else if (!others)
        vgpu_shares_leave(vgpu_state_get()->region, h->entry);
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
    CUdevice dev;
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    if (!prop || !vgpu_location_device(prop->location, &dev))
        return real(handle, bytes, prop, flags);
    CUresult rc = vgpu_device_index(dev, &index);
    if (rc == CUDA_SUCCESS)
        rc = vgpu_reserve(index, bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    vgpu_vmm_lock();
    rc = real(handle, bytes, prop, flags);
    vmm_handle *h = rc == CUDA_SUCCESS ? vgpu_vmm_new() : NULL;
    if (h) {
        *h = (vmm_handle){*handle, bytes, index, 1, 0, -1, 1};
    } else if (rc == CUDA_SUCCESS) {
        if (real_release)
            real_release(*handle); /* an allocation we could not track is not handed out */
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    vgpu_vmm_unlock();
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
    vgpu_vmm_lock();
    CUresult rc = real(handle);
    vmm_handle *h = rc == CUDA_SUCCESS ? vgpu_vmm_find(handle) : NULL;
    if (h && h->refs > 0) {
        h->refs--;
        settle(h);
    }
    vgpu_vmm_unlock();
    return rc;
}

VGPU_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    retain_fn real = REAL_CU(retain_fn, cuMemRetainAllocationHandle);
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    vgpu_vmm_lock();
    CUresult rc = real(handle, addr);
    vmm_handle *h = rc == CUDA_SUCCESS && handle ? vgpu_vmm_find(*handle) : NULL;
    if (h)
        h->refs++;
    vgpu_vmm_unlock();
    return rc;
}

/* What mapping [offset, offset + size) of `h` adds to its count: only an unshared import's
 * extent grows (0 on overflow is refused by the driver's own bounds check). */
static uint64_t extent_growth(const vmm_handle *h, size_t size, size_t offset)
{
    uint64_t end = (uint64_t)offset + size;
    return h && !h->priced && end >= offset && end > h->bytes ? end - h->bytes : 0;
}

VGPU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    map_fn real = REAL_CU(map_fn, cuMemMap);
    unmap_fn real_unmap = REAL_CU(unmap_fn, cuMemUnmap);
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    vgpu_vmm_lock();
    vmm_handle *h = vgpu_vmm_find(handle);
    uint64_t grow = extent_growth(h, size, offset);
    CUresult rc = grow ? vgpu_reserve(h->index, grow) : CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS) {
        vgpu_vmm_unlock();
        return rc; /* an import's mapping past the grant */
    }
    rc = real(ptr, size, offset, handle, flags);
    if (rc == CUDA_SUCCESS && h && vgpu_grow((void **)&maps, &capmaps, nmaps, sizeof *maps)) {
        if (real_unmap)
            real_unmap(ptr, size); /* an untracked mapping would outlive its count */
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (rc == CUDA_SUCCESS && h) {
        maps[nmaps++] = (vmm_map){ptr, size, handle};
        h->maps++;
        h->bytes += grow;
        grow = 0;
    }
    if (grow)
        vgpu_unreserve(h->index, grow); /* not mapped after all */
    vgpu_vmm_unlock();
    return rc;
}

/* cuMemUnmap takes the entire range that was mapped, which may hold several mappings. */
VGPU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    unmap_fn real = REAL_CU(unmap_fn, cuMemUnmap);
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    vgpu_vmm_lock();
    CUresult rc = real(ptr, size);
    for (size_t i = 0; rc == CUDA_SUCCESS && i < nmaps;) {
        if (maps[i].ptr < ptr || maps[i].ptr - ptr >= size) {
            i++;
            continue;
        }
        vmm_handle *h = vgpu_vmm_find(maps[i].handle);
        maps[i] = maps[--nmaps];
        if (h) {
            h->maps--;
            settle(h);
        }
    }
    vgpu_vmm_unlock();
    return rc;
}
