/* Stand-in libcuda.so.1: legacy interprocess memory (cuIpcGetMemHandle, cuIpcOpenMemHandle,
 * cuIpcCloseMemHandle) and cuMemGetAddressRange.
 *
 * CUDA Driver API reference, "Memory Management":
 * - cuIpcGetMemHandle takes "a pointer to the base of an existing device memory allocation
 *   created with cuMemAlloc and exports it for use in another process. This is a lightweight
 *   operation and may be called multiple times on an allocation"; memory freed and allocated
 *   again at the same address gets "a unique handle for the new memory". The handle is 64
 *   opaque bytes (CU_IPC_HANDLE_SIZE) passed by value.
 * - cuIpcOpenMemHandle "maps memory exported from another process ... into the current device
 *   address space" and returns "a device pointer usable in the local process" (the stand-in's is
 *   another address than the exporter's: nothing documents them equal). "If the memory handle
 *   has already been opened by the current context, the reference count on the handle is
 *   incremented by 1 and the existing device pointer is returned." Handles "may only be opened
 *   by one CUcontext per CUdevice per other process" (not modelled: the tests open one).
 * - cuIpcCloseMemHandle "decrements the reference count of the memory returned by
 *   cuIpcOpenMemHandle by 1. When the reference count reaches 0, this API unmaps the memory. The
 *   original allocation in the exporting process as well as imported mappings in other
 *   processes will be unaffected."
 * - "Calling cuMemFree on an exported memory region before calling cuIpcCloseMemHandle in the
 *   importing context will result in undefined behavior." The stand-in takes the reading that
 *   is worst for an accountant: the memory stays allocated, charged to a process still holding
 *   it, until its last importer closes it (pool.c, si_mem_hold and si_mem_hand_over).
 * - cuMemGetAddressRange_v2 "returns the base address in *pbase and size in *psize of the
 *   allocation by cuMemAlloc() or cuMemAllocPitch() that contains the input pointer"; either
 *   output may be NULL. An opened mapping is of that whole allocation, so its range is the
 *   local base and the allocation's size (the reference does not name imported pointers; the
 *   real driver's answer for them is what hack/gpu-check.sh checks).
 * - cuPointerGetAttribute, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: "a device ordinal of a device on
 *   which a pointer was allocated or registered": for an opened pointer, the exporter's GPU
 *   (opened on another GPU's context through peer access, it is not the current one). Other
 *   attributes are not modelled. */
#include <string.h>

#include "cuda_local.h"

#define SI_IPC_MAGIC 0x7369495043ull /* "siIPC" */
#define SI_IPC_MAX 256

typedef struct {
    char reserved[64]; /* CUipcMemHandle */
} CUipcMemHandle;

typedef struct { /* what the stand-in writes into a handle's 64 bytes */
    uint64_t magic;
    uint64_t ptr; /* the allocation's address in its exporter */
    uint64_t bytes;
    int32_t gpu;
    int32_t pad;
} si_ipc_rec;

typedef struct {
    CUdeviceptr local; /* 0: entry free */
    uint64_t ptr;      /* the allocation, as its node record names it */
    uint64_t bytes;
    int gpu;
    int refs;
    struct si_ctx *ctx;
} si_opened;

static si_opened opened[SI_IPC_MAX];

/* The node record of a live cuMemAlloc allocation: by its address in its owner (`proc` >= 0) or
 * by the address and GPU alone (`proc` < 0); NULL if there is none. Under the node's lock. */
static struct si_alloc *allocation(struct si_shared *sh, uint64_t ptr, int gpu, int proc) {
    for (int i = 0; i < SI_MAX_ALLOCS; i++) {
        struct si_alloc *a = &sh->alloc[i];
        if (a->kind == SI_MEM && a->ptr <= ptr && ptr - a->ptr < a->bytes &&
            (proc >= 0 ? a->proc == proc : a->gpu == gpu))
            return a;
    }
    return NULL;
}

SI_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    struct si_shared *sh = si_lock(n);
    struct si_alloc *a = n->slot >= 0 ? allocation(sh, dptr, 0, n->slot) : NULL;
    si_ipc_rec rec = {SI_IPC_MAGIC, dptr, a ? a->bytes : 0, a ? a->gpu : 0, 0};
    si_unlock(n);
    if (!a || a->ptr != dptr) /* "Base pointer to previously allocated device memory" */
        return CUDA_ERROR_INVALID_VALUE;
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->reserved, &rec, sizeof(rec));
    return CUDA_SUCCESS;
}

static si_opened *opened_at(CUdeviceptr local) {
    for (int i = 0; local && i < SI_IPC_MAX; i++)
        if (opened[i].local == local)
            return &opened[i];
    return NULL;
}

/* Maps the allocation `rec` names into this process (under si_cu_mu): a hold on it and a fresh
 * local address, or an error when it is gone. */
static CUresult open_rec(struct si_node *n, const si_ipc_rec *rec, si_opened *slot) {
    struct si_shared *sh = si_lock(n);
    struct si_alloc *a = allocation(sh, rec->ptr, rec->gpu, -1);
    int held = a && a->ptr == rec->ptr && a->proc != n->slot && !si_mem_hold(n, rec->ptr);
    if (held) {
        struct si_gpu_state *g = &sh->gpu[rec->gpu];
        *slot = (si_opened){g->next_va, rec->ptr, a->bytes, rec->gpu, 1, si_cu_current()};
        g->next_va += (a->bytes + 511) / 512 * 512 + 512; /* an address range of this process */
    }
    si_unlock(n);
    return held ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned flags) {
    si_ipc_rec rec;
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    memcpy(&rec, handle.reserved, sizeof(rec));
    if (!pdptr || flags > 1 || rec.magic != SI_IPC_MAGIC || rec.gpu < 0 ||
        rec.gpu >= n->cfg.ngpus) /* flags: 0 or CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
        return CUDA_ERROR_INVALID_VALUE;
    if (!si_cu_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&si_cu_mu);
    si_opened *o = NULL, *free_slot = NULL;
    for (int i = 0; i < SI_IPC_MAX; i++) {
        si_opened *e = &opened[i];
        if (e->local && e->ptr == rec.ptr && e->gpu == rec.gpu && e->ctx == si_cu_current())
            o = e;
        else if (!e->local && !free_slot)
            free_slot = e;
    }
    if (o) {
        o->refs++; /* opened again by the same context: the same pointer */
        rc = CUDA_SUCCESS;
    } else {
        rc = free_slot ? open_rec(n, &rec, free_slot) : CUDA_ERROR_OUT_OF_MEMORY;
        o = rc == CUDA_SUCCESS ? free_slot : NULL;
    }
    if (o)
        *pdptr = o->local;
    pthread_mutex_unlock(&si_cu_mu);
    return rc;
}

SI_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned flags) {
    return ipc_open(pdptr, handle, flags);
}

/* CUDA 11.0 renamed the entry point (cuda.h maps cuIpcOpenMemHandle to it); same arguments. */
SI_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                         unsigned flags) {
    return ipc_open(pdptr, handle, flags);
}

SI_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    pthread_mutex_lock(&si_cu_mu);
    si_opened *o = opened_at(dptr);
    if (o && --o->refs == 0) { /* unmapped: this process no longer holds the allocation */
        si_lock(n);
        si_mem_let_go(n, o->ptr);
        si_unlock(n);
        memset(o, 0, sizeof(*o));
    }
    pthread_mutex_unlock(&si_cu_mu);
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    CUdeviceptr base = 0;
    uint64_t bytes = 0;
    if (!n)
        return rc;
    pthread_mutex_lock(&si_cu_mu);
    for (int i = 0; !bytes && i < SI_IPC_MAX; i++) {
        si_opened *o = &opened[i];
        if (o->local && o->local <= dptr && dptr - o->local < o->bytes)
            base = o->local, bytes = o->bytes;
    }
    pthread_mutex_unlock(&si_cu_mu);
    struct si_shared *sh = si_lock(n);
    struct si_alloc *a = !bytes && n->slot >= 0 ? allocation(sh, dptr, 0, n->slot) : NULL;
    if (a)
        base = a->ptr, bytes = a->bytes;
    si_unlock(n);
    if (!bytes)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = bytes;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    int gpu = -1;
    if (!n)
        return rc;
    if (attribute != 9) /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&si_cu_mu);
    for (int i = 0; gpu < 0 && i < SI_IPC_MAX; i++)
        if (opened[i].local && opened[i].local <= ptr && ptr - opened[i].local < opened[i].bytes)
            gpu = opened[i].gpu;
    pthread_mutex_unlock(&si_cu_mu);
    struct si_shared *sh = si_lock(n);
    struct si_alloc *a = gpu < 0 && n->slot >= 0 ? allocation(sh, ptr, 0, n->slot) : NULL;
    gpu = a ? a->gpu : gpu;
    si_unlock(n);
    if (gpu < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *(int *)data = gpu;
    return CUDA_SUCCESS;
}
