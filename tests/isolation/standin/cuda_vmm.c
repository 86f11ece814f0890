/* Stand-in libcuda.so.1: virtual memory management (VMM), with the driver's reference counting.
 *
 * CUDA Driver API reference, "Virtual Memory Management": cuMemCreate takes physical memory and
 * returns a handle; cuMemMap backs a reserved address range with it. cuMemRelease: "The memory
 * allocation will be freed when all outstanding mappings to the memory are unmapped and when all
 * outstanding references to the handle (including its shareable counterparts) are also
 * released. The generic memory handle can be freed when there are still outstanding mappings".
 * cuMemUnmap: "The range must be the entire contiguous address range that was mapped to ... Any
 * backing memory allocations will be freed if there are no existing mappings and there are no
 * unreleased memory handles." cuMemRetainAllocationHandle returns the handle of a mapped address
 * ("the same handle value used when mapping the memory"), which must be released once more.
 * So physical memory is given back only when a handle's references and mappings are both 0. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_local.h"

#define SI_GRANULARITY (2ull << 20)
#define SI_VMM_MAX 1024

typedef struct {
    CUdeviceptr ptr; /* start of the mapped range; 0: entry free */
    size_t size;
    CUmemGenericAllocationHandle handle;
} si_mapping;

typedef struct {
    CUmemGenericAllocationHandle handle; /* 0: entry free */
    uint64_t bytes;
    int refs; /* cuMemCreate and cuMemRetainAllocationHandle add one, cuMemRelease takes one */
    int maps;
    CUmemAllocationProp prop;
    int imported; /* the handle came from another process (see the import below) */
} si_handle;

static si_handle handles[SI_VMM_MAX];
static si_mapping mappings[SI_VMM_MAX];
static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;

static si_handle *find(CUmemGenericAllocationHandle h) {
    for (int i = 0; h && i < SI_VMM_MAX; i++)
        if (handles[i].handle == h)
            return &handles[i];
    return NULL;
}

/* Frees the physical memory once nothing references it (under vmm_mu). */
static void settle(si_handle *h) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (h->refs > 0 || h->maps > 0)
        return;
    if (n) { /* the memory goes only when no other process holds it (pool.c, si_mem_hold) */
        si_lock(n);
        si_mem_let_go(n, h->handle);
        si_unlock(n);
    }
    memset(h, 0, sizeof(*h));
}

SI_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                 int option) {
    (void)option;
    if (!g || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *g = SI_GRANULARITY;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
                               const CUmemAllocationProp *prop, unsigned long long flags) {
    if (!handle || !prop || flags || bytes == 0 || bytes % SI_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = si_location_dev(prop->location);
    if (dev < 0) /* not a device's memory */
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_mu);
    si_handle *h = NULL;
    for (int i = 0; !h && i < SI_VMM_MAX; i++)
        h = handles[i].handle ? NULL : &handles[i];
    CUresult rc = h ? si_cu_take(NULL, dev, bytes, SI_VMM, handle)
                    : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        *h = (si_handle){*handle, bytes, 1, 0, *prop, 0};
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

SI_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    pthread_mutex_lock(&vmm_mu);
    si_handle *h = find(handle);
    if (h && h->refs > 0) {
        h->refs--;
        settle(h);
    }
    pthread_mutex_unlock(&vmm_mu);
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)addr;
    CUresult rc = CUDA_ERROR_INVALID_VALUE; /* "If the address requested is not mapped" */
    if (!handle)
        return rc;
    pthread_mutex_lock(&vmm_mu);
    for (int i = 0; i < SI_VMM_MAX; i++) {
        si_mapping *m = &mappings[i];
        if (m->ptr && p >= m->ptr && p < m->ptr + m->size) {
            find(m->handle)->refs++;
            *handle = m->handle;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

SI_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                          CUmemGenericAllocationHandle handle) {
    pthread_mutex_lock(&vmm_mu);
    si_handle *h = find(handle);
    if (h && prop)
        *prop = h->prop;
    pthread_mutex_unlock(&vmm_mu);
    return h && prop ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
                                       CUdeviceptr addr, unsigned long long flags) {
    static uint64_t next = 0x7e0000000000ull;
    (void)align, (void)addr, (void)flags;
    if (!ptr || size == 0 || size % SI_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    *ptr = __atomic_fetch_add(&next, size + SI_GRANULARITY, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    return ptr && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuMemMap: offset + size must lie within the allocation; a released handle cannot be mapped. */
SI_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (!ptr || !size || flags || size % SI_GRANULARITY || offset % SI_GRANULARITY)
        return rc;
    pthread_mutex_lock(&vmm_mu);
    si_handle *h = find(handle);
    for (int i = 0; h && h->refs > 0 && offset + size <= h->bytes && i < SI_VMM_MAX; i++) {
        if (!mappings[i].ptr) {
            mappings[i] = (si_mapping){ptr, size, handle};
            h->maps++;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

/* Unmaps every mapping inside [ptr, ptr + size); one that straddles the range's end is an error
 * (a sub-range cannot be unmapped), as is a range that maps nothing. */
SI_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    int found = 0;
    if (!ptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_mu);
    for (int i = 0; i < SI_VMM_MAX; i++) {
        si_mapping *m = &mappings[i];
        if (m->ptr && m->ptr < ptr + size && m->ptr + m->size > ptr &&
            (m->ptr < ptr || m->ptr + m->size > ptr + size)) {
            pthread_mutex_unlock(&vmm_mu);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (int i = 0; i < SI_VMM_MAX; i++) {
        si_mapping *m = &mappings[i];
        if (m->ptr && m->ptr >= ptr && m->ptr + m->size <= ptr + size) {
            si_handle *h = find(m->handle);
            memset(m, 0, sizeof(*m));
            h->maps--;
            settle(h);
            found = 1;
        }
    }
    pthread_mutex_unlock(&vmm_mu);
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuMemSetAccess: the range must be mapped; the stand-in keeps no access flags. */
SI_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void *desc, size_t count) {
    int mapped = 0;
    if (!ptr || !size || !desc || !count)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_mu);
    for (int i = 0; i < SI_VMM_MAX; i++)
        mapped |= mappings[i].ptr && mappings[i].ptr <= ptr &&
                  ptr < mappings[i].ptr + mappings[i].size;
    pthread_mutex_unlock(&vmm_mu);
    return mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- sharing an allocation between processes ----
 * cuMemExportToShareableHandle: exports "an allocation to a requested shareable handle type";
 * the allocation must have been created with that type in CUmemAllocationProp::
 * requestedHandleTypes. For CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (1) the shareable handle is
 * an int file descriptor, which another process receives (a UNIX socket, or inherited) and passes
 * to cuMemImportFromShareableHandle; the imported handle is mapped like any other and released
 * with cuMemRelease. "There is no guarantee that the contents of handle will be the same CUDA
 * memory handle for the same given OS shareable handle, or the same underlying allocation."
 * The stand-in's descriptor is a regular file holding the allocation's address, size and
 * properties (a file of its own per export, as the real driver's descriptor is not documented
 * to be); an import takes no new memory but is a reference of the importing process:
 * cuMemRelease, "each time a recipient process imports a shareable handle, it needs to pair it
 * with cuMemRelease for the handle to be freed", so the memory outlives the exporter's release
 * and unmap while an importer holds it (pool.c, si_mem_hold). The descriptor itself is a
 * reference too (cuMemRelease: "all outstanding references to the handle (including its
 * shareable counterparts)"): memory no process holds stays allocated while any process still
 * has an exported file open, and an import through it then works (pins.c). */
enum { SI_HANDLE_POSIX_FD = 1 };

typedef struct {
    CUmemGenericAllocationHandle handle;
    uint64_t bytes;
    CUmemAllocationProp prop;
} si_export;

SI_EXPORT CUresult cuMemExportToShareableHandle(void *shareable,
                                                CUmemGenericAllocationHandle handle, int type,
                                                unsigned long long flags) {
    si_export rec;
    CUresult rc = CUDA_SUCCESS;
    struct si_node *n = si_cu_node(&rc);
    int fd = -1;
    if (!n)
        return rc;
    if (!shareable || flags || type != SI_HANDLE_POSIX_FD)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_mu);
    si_handle *h = find(handle);
    int allowed = h && h->refs > 0 && (h->prop.requestedHandleTypes & SI_HANDLE_POSIX_FD);
    if (allowed) {
        rec = (si_export){h->handle, h->bytes, h->prop};
        si_lock(n);
        fd = si_export_open(n, h->handle, &rec, sizeof(rec));
        si_unlock(n);
    }
    pthread_mutex_unlock(&vmm_mu);
    if (!allowed)
        return CUDA_ERROR_INVALID_VALUE;
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)shareable = fd;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                  void *os_handle, int type) {
    si_export rec;
    int fd = (int)(intptr_t)os_handle;
    if (!handle || type != SI_HANDLE_POSIX_FD ||
        pread(fd, &rec, sizeof(rec), 0) != (ssize_t)sizeof(rec))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    pthread_mutex_lock(&vmm_mu);
    si_handle *h = find(rec.handle);
    for (int i = 0; !h && i < SI_VMM_MAX; i++)
        h = handles[i].handle ? NULL : &handles[i];
    if (h && h->handle) {
        h->refs++; /* imported into the exporting process itself: one more reference */
    } else if (h) {
        si_lock(n);
        rc = si_mem_hold(n, rec.handle) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
        si_unlock(n);
        if (rc == CUDA_SUCCESS)
            *h = (si_handle){rec.handle, rec.bytes, 1, 0, rec.prop, 1};
    }
    pthread_mutex_unlock(&vmm_mu);
    if (!h || rc != CUDA_SUCCESS)
        return h ? rc : CUDA_ERROR_OUT_OF_MEMORY;
    *handle = rec.handle;
    return CUDA_SUCCESS;
}
