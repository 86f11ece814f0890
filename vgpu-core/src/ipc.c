/* Legacy CUDA IPC: cuIpcGetMemHandle, cuIpcOpenMemHandle(_v2), cuIpcCloseMemHandle (what
 * torch.multiprocessing uses to share CUDA tensors). CUDA Driver API reference:
 * cuIpcGetMemHandle exports the base of a cuMemAlloc allocation ("may be called multiple times on
 * an allocation"); cuIpcOpenMemHandle maps it into the importer and returns a pointer of the
 * importer's own, the same one with "the reference count on the handle ... incremented by 1" when
 * the same context opens it again; cuIpcCloseMemHandle takes one reference and unmaps at 0.
 * "Calling cuMemFree on an exported memory region before calling cuIpcCloseMemHandle in the
 * importing context will result in undefined behavior": the reference does not say the memory is
 * freed then, so it is taken to stay while an importer holds it (fail closed).
 *
 * So the rule of shared VMM memory (vmm.c) applies: an exported allocation moves from the
 * exporter's slot into a shared entry of the container (shares.c), known by its handle's bytes;
 * an importer of the container joins the entry and pays nothing more; the entry counts while any
 * live process of the container holds it (the exporter until its cuMemFree, each importer until
 * its last close, or exit). An import the container holds no entry for (another container's
 * memory, or memory whose exporter here let go) is charged to the importer on the GPU holding
 * it, by the allocation's size (cuMemGetAddressRange of the opened pointer; the open is
 * undone when the size is not reported), and refused past the grant. */
#include <pthread.h>
#include <stdint.h>

#include "account.h"
#include "allocs.h"
#include "hooks.h"
#include "ipc.h"
#include "shares.h"
#include "state.h"

typedef CUresult (*get_fn)(CUipcMemHandle *, CUdeviceptr);
typedef CUresult (*open_fn)(CUdeviceptr *, CUipcMemHandle, unsigned int);
typedef CUresult (*close_fn)(CUdeviceptr);
typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*attr_fn)(void *, int, CUdeviceptr);

enum { DEVICE_ORDINAL = 9 }; /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */

typedef struct {
    CUdeviceptr ptr; /* the pointer the driver returned here */
    uint64_t bytes;
    int index;
    int refs;
    int entry; /* the shared entry counting it, or -1: this process's slot does */
} ipc_open;

static ipc_open *opens;
static size_t nopens, capopens;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

#define MISSING(fn) if (!(fn)) return CUDA_ERROR_NOT_INITIALIZED

/* The identity of a handle in the table of shared entries: two FNV-1a hashes of its 64 bytes
 * (forwards and backwards), the top bit set so it never equals a file's (device, inode). */
static void handle_id(const CUipcMemHandle *h, uint64_t id[2])
{
    uint64_t a = 0xcbf29ce484222325ull, b = 0x6c62272e07bb0142ull;
    for (size_t i = 0; i < sizeof h->reserved; i++) {
        a = (a ^ (unsigned char)h->reserved[i]) * 0x100000001b3ull;
        b = (b ^ (unsigned char)h->reserved[sizeof h->reserved - 1 - i]) * 0x100000001b3ull;
    }
    id[0] = a | 1ull << 63;
    id[1] = b;
}

void vgpu_ipc_forget(void)
{
    nopens = 0;
    pthread_mutex_init(&mu, NULL);
}

/* An exported cuMemAlloc pointer becomes a shared entry of the container (its bytes leave this
 * process's slot); one exported again teaches its entry the new handle. */
VGPU_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
    get_fn real = REAL_CU(get_fn, cuIpcGetMemHandle);
    int index, entry;
    uint64_t bytes, id[2];
    MISSING(real);
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    CUresult rc = real(handle, dptr);
    if (rc != CUDA_SUCCESS || !handle)
        return rc;
    handle_id(handle, id);
    if (vgpu_allocs_take(VGPU_KIND_EXPORTED, dptr, &index, &bytes) == 0) {
        vgpu_shares_add(s->region, (int)bytes, index, 0, id);
        vgpu_allocs_put(VGPU_KIND_EXPORTED, dptr, index, bytes);
    } else if (vgpu_allocs_take(VGPU_KIND_POINTER, dptr, &index, &bytes) == 0) {
        entry = vgpu_shares_add(s->region, -1, index, bytes, id);
        if (entry >= 0)
            vgpu_allocs_put(VGPU_KIND_EXPORTED, dptr, index, (uint64_t)entry);
        else
            vgpu_allocs_put(VGPU_KIND_POINTER, dptr, index, bytes); /* the table is full */
    }
    return rc;
}

int vgpu_ipc_free_begin(CUdeviceptr dptr, int *index, uint64_t *entry)
{
    return vgpu_allocs_take(VGPU_KIND_EXPORTED, dptr, index, entry) == 0;
}

CUresult vgpu_ipc_free_end(CUresult rc, CUdeviceptr dptr, int index, uint64_t entry)
{
    const vgpu_state *s = vgpu_state_get();
    if (rc == CUDA_SUCCESS && s)
        vgpu_shares_leave(s->region, (int)entry);
    else if (rc != CUDA_SUCCESS)
        vgpu_allocs_put(VGPU_KIND_EXPORTED, dptr, index, entry);
    return rc;
}

static ipc_open *find(CUdeviceptr ptr)
{
    for (size_t i = 0; i < nopens; i++)
        if (opens[i].ptr == ptr)
            return &opens[i];
    return NULL;
}

/* The limits index of the GPU holding the memory at `ptr`: "a device ordinal of a device on which
 * a pointer was allocated" (cuPointerGetAttribute), which for memory opened through peer access
 * is not the current context's; the current context's when the driver does not say. */
static CUresult holder_index(CUdeviceptr ptr, int *index)
{
    attr_fn attr = REAL_CU(attr_fn, cuPointerGetAttribute);
    int ordinal = -1;
    if (attr && attr(&ordinal, DEVICE_ORDINAL, ptr) == CUDA_SUCCESS)
        return vgpu_device_index(ordinal, index); /* a GPU of no grant here: refused */
    return vgpu_current_index(index);
}

/* What opening `handle` at `ptr` costs this process (under mu): joining the container's entry,
 * or the allocation's size reserved on the GPU that holds it. */
static CUresult charge(const vgpu_state *s, const CUipcMemHandle *handle, CUdeviceptr ptr,
                       ipc_open *o)
{
    range_fn range = REAL_CU(range_fn, cuMemGetAddressRange_v2);
    uint64_t id[2];
    size_t size = 0;
    CUdeviceptr base = 0;
    handle_id(handle, id);
    *o = (ipc_open){ptr, 0, 0, 1, -1};
    o->entry = vgpu_shares_join(s->region, id, &o->index, &o->bytes);
    if (o->entry >= 0)
        return CUDA_SUCCESS;
    CUresult rc = range ? range(&base, &size, ptr) : CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS && (base != ptr || size == 0))
        rc = CUDA_ERROR_NOT_SUPPORTED; /* not the whole allocation: its size is unknown */
    rc = rc == CUDA_SUCCESS ? holder_index(ptr, &o->index) : rc;
    o->bytes = size;
    return rc == CUDA_SUCCESS ? vgpu_reserve(o->index, size) : rc;
}

/* Gives back what opening `o` cost (under mu): its reservation, or its part in the shared entry
 * unless another open of this process holds the entry too. */
static void give_back(const vgpu_state *s, const ipc_open *o)
{
    int others = 0;
    for (size_t i = 0; o->entry >= 0 && i < nopens; i++)
        others |= &opens[i] != o && opens[i].entry == o->entry;
    if (o->entry < 0)
        vgpu_unreserve(o->index, o->bytes);
    else if (!others)
        vgpu_shares_leave(s->region, o->entry);
}

static CUresult ipc_open_with(open_fn real, CUdeviceptr *pdptr, CUipcMemHandle handle,
                              unsigned int flags)
{
    close_fn real_close = REAL_CU(close_fn, cuIpcCloseMemHandle);
    ipc_open o;
    MISSING(real);
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(pdptr, handle, flags);
    ipc_open *known = rc == CUDA_SUCCESS && pdptr ? find(*pdptr) : NULL;
    if (known) {
        known->refs++; /* opened again by the same context: the same pointer */
    } else if (rc == CUDA_SUCCESS && pdptr) {
        rc = charge(s, &handle, *pdptr, &o);
        if (rc == CUDA_SUCCESS && vgpu_grow((void **)&opens, &capopens, nopens, sizeof *opens)) {
            give_back(s, &o);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (rc == CUDA_SUCCESS)
            opens[nopens++] = o;
        if (rc != CUDA_SUCCESS && real_close)
            real_close(*pdptr); /* memory we could not count is not handed out */
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

VGPU_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                        unsigned int flags)
{
    return ipc_open_with(REAL_CU(open_fn, cuIpcOpenMemHandle), pdptr, handle, flags);
}

VGPU_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                           unsigned int flags)
{
    return ipc_open_with(REAL_CU(open_fn, cuIpcOpenMemHandle_v2), pdptr, handle, flags);
}

/* The last close of an opened pointer gives back what opening it cost. */
VGPU_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    close_fn real = REAL_CU(close_fn, cuIpcCloseMemHandle);
    MISSING(real);
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(dptr);
    ipc_open *o = rc == CUDA_SUCCESS ? find(dptr) : NULL;
    if (o && --o->refs <= 0) {
        give_back(s, o);
        *o = opens[--nopens];
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
