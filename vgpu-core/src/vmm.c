/* Virtual memory management: physical memory is counted from cuMemCreate until the driver really
 * frees it. CUDA Driver API reference, cuMemRelease: the allocation "will be freed when all
 * outstanding mappings to the memory are unmapped and when all outstanding references to the
 * handle ... are also released"; cuMemUnmap frees it "if there are no existing mappings and there
 * are no unreleased memory handles". So each handle we created keeps a reference count
 * (cuMemCreate and cuMemRetainAllocationHandle add one, cuMemRelease takes one) and a mapping
 * count, and its bytes are given back when both reach 0: NVIDIA's own sample pattern (create,
 * map, release at once, use, unmap) stays counted while the memory is in use. Memory created on
 * the host (a non-device location) is not device memory and passes uncounted. The driver is
 * called under the table's mutex so a mapping and its count change together.
 *
 * Shared memory: "each time a recipient process imports a shareable handle, it needs to pair it
 * with cuMemRelease for the handle to be freed" (cuMemRelease), so an importer keeps the memory
 * after the exporter let go. An allocation exported as a POSIX file descriptor moves from the
 * exporter's slot into the region's table of shared entries (shares.c), known by the exported
 * file's identity (fstat's device and inode); an importer of the same file joins that entry, and
 * the entry counts once while any live process of the container holds the memory. Only a regular
 * file's identity is trusted: device nodes and anonymous inodes share one inode among many files.
 * An import the container holds no entry for (from another container, an untrusted file, or
 * after every holder let go) is counted to the importer by its mappings' extent (the size of an
 * imported allocation is not reported), from its first mapping until its release and unmap. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "account.h"
#include "allocs.h"
#include "hooks.h"
#include "shares.h"
#include "state.h"

typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *, void *);
typedef CUresult (*export_fn)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
typedef CUresult (*import_fn)(CUmemGenericAllocationHandle *, void *, int);
typedef CUresult (*props_fn)(CUmemAllocationProp *, CUmemGenericAllocationHandle);

enum { POSIX_FD = 1 }; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */

typedef struct {
    CUmemGenericAllocationHandle handle;
    uint64_t bytes;
    int index; /* limits index of the allocation's location */
    int refs;
    int maps;
    int entry;  /* the shared entry counting it, or -1: this process's slot does */
    int priced; /* 1: bytes is its size; 0: an unshared import, counted by its mappings' extent */
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
        handles[nhandles++] = (vmm_handle){*handle, bytes, index, 1, 0, -1, 1};
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
    pthread_mutex_lock(&mu);
    vmm_handle *h = find(handle);
    uint64_t grow = extent_growth(h, size, offset);
    CUresult rc = grow ? vgpu_reserve(h->index, grow) : CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&mu);
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

/* The identity of the exported file `fd` (its device and inode): 0, or -1 when it cannot be
 * trusted to name one allocation (not a regular file: device nodes and anonymous inodes share one
 * inode among many files). */
static int file_identity(int fd, uint64_t id[2])
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    id[0] = (uint64_t)st.st_dev;
    id[1] = (uint64_t)st.st_ino;
    return 0;
}

/* cuMemExportToShareableHandle (CUDA Driver API, Virtual Memory Management): a POSIX file
 * descriptor exported from memory this process counts makes it a shared entry of the container,
 * known by the file's identity, so an importer here joins it rather than count it again. */
VGPU_EXPORT CUresult cuMemExportToShareableHandle(void *shareable,
                                                  CUmemGenericAllocationHandle handle, int type,
                                                  unsigned long long flags)
{
    export_fn real = REAL_CU(export_fn, cuMemExportToShareableHandle);
    uint64_t id[2];
    MISSING(real);
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(shareable, handle, type, flags);
    vmm_handle *h = rc == CUDA_SUCCESS && type == POSIX_FD ? find(handle) : NULL;
    if (h && h->priced && file_identity(*(int *)shareable, id) == 0) {
        int entry = vgpu_shares_add(s->region, h->entry, h->index, h->bytes, id);
        h->entry = h->entry < 0 ? entry : h->entry;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* The device index of an imported allocation's location, or -1 (host memory, or not ours). */
static int import_index(CUmemGenericAllocationHandle handle)
{
    props_fn props = REAL_CU(props_fn, cuMemGetAllocationPropertiesFromHandle);
    CUmemAllocationProp prop = {0};
    int index = -1;
    if (!props || props(&prop, handle) != CUDA_SUCCESS ||
        prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        vgpu_device_index(prop.location.id, &index) != CUDA_SUCCESS)
        return -1;
    return index;
}

/* cuMemImportFromShareableHandle: the import is one more reference (of this process). Memory the
 * container already counts (a live shared entry with the file's identity) is joined; any other
 * import is counted here by its mappings' extent (see cuMemMap). */
VGPU_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                    void *os_handle, int type)
{
    import_fn real = REAL_CU(import_fn, cuMemImportFromShareableHandle);
    release_fn real_release = REAL_CU(release_fn, cuMemRelease);
    MISSING(real);
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(handle, os_handle, type);
    vmm_handle *h = rc == CUDA_SUCCESS && handle ? find(*handle) : NULL;
    int index = rc == CUDA_SUCCESS && handle && !h ? import_index(*handle) : -1;
    if (h) {
        h->refs++; /* the same handle as one this process holds: one more reference */
    } else if (index >= 0 && vgpu_grow((void **)&handles, &caphandles, nhandles, sizeof *handles)) {
        if (real_release)
            real_release(*handle); /* an import we could not track is not handed out */
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (index >= 0) {
        int entry = -1, dev = index;
        uint64_t bytes = 0, id[2];
        if (type == POSIX_FD && file_identity((int)(intptr_t)os_handle, id) == 0)
            entry = vgpu_shares_join(s->region, id, &dev, &bytes);
        handles[nhandles++] = (vmm_handle){*handle, bytes, dev, 1, 0, entry, entry >= 0};
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
