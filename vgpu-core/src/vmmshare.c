/* Virtual memory management shared among processes: cuMemExportToShareableHandle and
 * cuMemImportFromShareableHandle, over the handles vmm.c tracks (vmm.h).
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
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hooks.h"
#include "pins.h"
#include "shares.h"
#include "state.h"
#include "vmm.h"

typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*export_fn)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
typedef CUresult (*import_fn)(CUmemGenericAllocationHandle *, void *, int);
typedef CUresult (*props_fn)(CUmemAllocationProp *, CUmemGenericAllocationHandle);

enum { POSIX_FD = 1 }; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */

#define MISSING(fn) if (!(fn)) return CUDA_ERROR_NOT_INITIALIZED

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
 * known by the file's identity, so an importer here joins it rather than count it again. The
 * descriptor is itself a reference (cuMemRelease: "including its shareable counterparts"), so
 * the entry is pinned (pins.h) and counts while any copy of the descriptor is open, after every
 * handle was released; a descriptor that could not be pinned or learnt is closed again and the
 * export refused, as nothing would count what it keeps. */
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
    vgpu_vmm_lock();
    CUresult rc = real(shareable, handle, type, flags);
    vmm_handle *h = rc == CUDA_SUCCESS && type == POSIX_FD ? vgpu_vmm_find(handle) : NULL;
    int fd = h ? *(int *)shareable : -1, entry = -1;
    if (h && h->priced && file_identity(fd, id) == 0) {
        if (vgpu_pin(fd) == 0)
            entry = vgpu_shares_export(s->region, h->entry, h->index, h->bytes, id);
        h->entry = h->entry < 0 ? entry : h->entry;
        if (entry < 0) {
            close(fd); /* the export is undone: the table is full or the file cannot be told */
            *(int *)shareable = -1;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    vgpu_vmm_unlock();
    return rc;
}

/* The device index of an imported allocation's location, or -1 (host memory, or not ours). */
static int import_index(CUmemGenericAllocationHandle handle)
{
    props_fn props = REAL_CU(props_fn, cuMemGetAllocationPropertiesFromHandle);
    CUmemAllocationProp prop = {0};
    CUdevice dev;
    int index = -1;
    if (!props || props(&prop, handle) != CUDA_SUCCESS ||
        !vgpu_location_device(prop.location, &dev) ||
        vgpu_device_index(dev, &index) != CUDA_SUCCESS)
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
    vgpu_vmm_lock();
    CUresult rc = real(handle, os_handle, type);
    vmm_handle *h = rc == CUDA_SUCCESS && handle ? vgpu_vmm_find(*handle) : NULL, *fresh;
    int index = rc == CUDA_SUCCESS && handle && !h ? import_index(*handle) : -1;
    if (h) {
        h->refs++; /* the same handle as one this process holds: one more reference */
    } else if (index >= 0 && !(fresh = vgpu_vmm_new())) {
        if (real_release)
            real_release(*handle); /* an import we could not track is not handed out */
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (index >= 0) {
        int entry = -1, dev = index;
        uint64_t bytes = 0, id[2];
        if (type == POSIX_FD && file_identity((int)(intptr_t)os_handle, id) == 0)
            entry = vgpu_shares_join(s->region, id, &dev, &bytes);
        *fresh = (vmm_handle){*handle, bytes, dev, 1, 0, entry, entry >= 0};
    }
    vgpu_vmm_unlock();
    return rc;
}
