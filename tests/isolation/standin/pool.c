/* One memory pool per simulated GPU, shared by every process, and per-process busy records.
 * All functions here run under the state lock (si_lock). */
#include <string.h>
#include <unistd.h>

#include "standin.h"

#define SI_ALIGN 512ull

/* Take `bytes` of GPU `gpu` for this process; CUDA_ERROR_OUT_OF_MEMORY semantics: returns -1
 * when the pool (or the allocation table) is exhausted. */
int si_mem_take(struct si_node *n, int gpu, uint64_t bytes, int kind, uint64_t *ptr) {
    struct si_shared *sh = n->sh;
    struct si_gpu_state *g = &sh->gpu[gpu];
    int slot = si_register(n);
    if (slot < 0 || bytes > n->cfg.gpu[gpu].memory - g->used)
        return -1;
    if (!si_dmem_allows(n, gpu, slot, bytes)) /* the driver's cgroup limit (dmem.c) */
        return -1;
    for (int i = 0; i < SI_MAX_ALLOCS; i++) {
        struct si_alloc *a = &sh->alloc[i];
        if (a->kind != SI_FREE)
            continue;
        a->ptr = g->next_va;
        g->next_va += (bytes + SI_ALIGN - 1) / SI_ALIGN * SI_ALIGN + SI_ALIGN;
        a->bytes = bytes;
        a->proc = slot;
        a->gpu = gpu;
        a->kind = kind;
        g->used += bytes;
        sh->proc[slot].used[gpu] += bytes;
        *ptr = a->ptr;
        return 0;
    }
    return -1;
}

/* Give back this process's allocation at `ptr` of `kind`; -1 if there is none. */
int si_mem_give(struct si_node *n, uint64_t ptr, int kind, int *gpu_out) {
    struct si_shared *sh = n->sh;
    for (int i = 0; i < SI_MAX_ALLOCS; i++) {
        struct si_alloc *a = &sh->alloc[i];
        if (a->kind != kind || a->ptr != ptr || a->proc != n->slot)
            continue;
        if (gpu_out)
            *gpu_out = a->gpu;
        if (kind == SI_MEM) { /* kept for a process that opened it by IPC (cuda_ipc.c) */
            si_mem_hand_over(n, a);
            return 0;
        }
        sh->gpu[a->gpu].used -= a->bytes;
        sh->proc[a->proc].used[a->gpu] -= a->bytes;
        memset(a, 0, sizeof(*a));
        return 0;
    }
    return -1;
}

/* CUDA Driver API reference, cuMemRelease: shared memory "will be freed when all outstanding
 * mappings to the memory are unmapped and when all outstanding references to the handle ... are
 * also released", and "each time a recipient process imports a shareable handle, it needs to pair
 * it with cuMemRelease for the handle to be freed": an import is a reference of the importing
 * process, which keeps the memory after the exporter let go. The memory stays charged to one
 * process (a cgroup limit charges an owner, dmem.c); each other holder has a hold record.
 * cuMemAlloc memory opened by cuIpcOpenMemHandle in another process is held the same way
 * (cuda_ipc.c: the exporter's free before the importer's close is undefined; it is kept). */
int si_mem_hold(struct si_node *n, uint64_t ptr) {
    struct si_shared *sh = n->sh;
    struct si_alloc *mem = NULL, *free_rec = NULL;
    int slot = si_register(n);
    for (int i = 0; i < SI_MAX_ALLOCS; i++) {
        struct si_alloc *a = &sh->alloc[i];
        if ((a->kind == SI_VMM || a->kind == SI_MEM || a->kind == SI_EXPORTED) && a->ptr == ptr)
            mem = a;
        else if (a->kind == SI_FREE && !free_rec)
            free_rec = a;
    }
    if (slot >= 0 && mem && mem->kind == SI_EXPORTED) { /* imported through a descriptor that */
        mem->kind = SI_VMM;                           /* alone still held it: charged here */
        mem->proc = slot;
        sh->exported--;
        sh->proc[slot].used[mem->gpu] += mem->bytes;
        return 0;
    }
    if (slot < 0 || !mem || !free_rec)
        return -1; /* freed already: no handle, mapping or open descriptor was left */
    *free_rec = (struct si_alloc){ptr, 0, slot, mem->gpu, SI_HOLD, 0};
    sh->holds++;
    return 0;
}

/* The memory record `a` passes to a process still holding it (its hold record goes), is kept by
 * its exported descriptors while one is still open (pins.c), or is freed when nothing holds it. */
void si_mem_hand_over(struct si_node *n, struct si_alloc *a) {
    struct si_shared *sh = n->sh;
    for (int i = 0; sh->holds > 0 && i < SI_MAX_ALLOCS; i++) {
        struct si_alloc *h = &sh->alloc[i];
        if (h->kind != SI_HOLD || h->ptr != a->ptr)
            continue;
        sh->proc[a->proc].used[a->gpu] -= a->bytes;
        sh->proc[h->proc].used[a->gpu] += a->bytes;
        a->proc = h->proc;
        memset(h, 0, sizeof(*h));
        sh->holds--;
        return;
    }
    sh->proc[a->proc].used[a->gpu] -= a->bytes;
    if (a->kind == SI_VMM && si_exports_open(n, a)) {
        a->kind = SI_EXPORTED; /* no process's any more; freed at the last close */
        sh->exported++;
        return;
    }
    if (a->kind == SI_VMM)
        si_exports_remove(n, a);
    sh->gpu[a->gpu].used -= a->bytes;
    memset(a, 0, sizeof(*a));
}

void si_mem_let_go(struct si_node *n, uint64_t ptr) {
    struct si_shared *sh = n->sh;
    for (int i = 0; i < SI_MAX_ALLOCS; i++) {
        struct si_alloc *a = &sh->alloc[i];
        if (a->ptr != ptr || a->proc != n->slot ||
            (a->kind != SI_HOLD && a->kind != SI_VMM && a->kind != SI_MEM))
            continue;
        if (a->kind == SI_HOLD) {
            memset(a, 0, sizeof(*a));
            sh->holds--;
        } else {
            si_mem_hand_over(n, a);
        }
        return;
    }
}

static struct si_busy *busy_record(struct si_shared *sh, int pid) {
    struct si_busy *oldest = &sh->busy[0];
    for (int i = 0; i < SI_MAX_BUSY; i++) {
        if (sh->busy[i].pid == pid)
            return &sh->busy[i];
        if (sh->busy[i].seq < oldest->seq)
            oldest = &sh->busy[i];
    }
    memset(oldest, 0, sizeof(*oldest));
    oldest->pid = pid;
    oldest->seq = ++sh->busy_seq;
    return oldest;
}

/* Adds `ns` of GPU `gpu`'s time to `pid`'s busy record (kept after the process exits). */
void si_busy_add(struct si_shared *sh, int pid, int gpu, uint64_t ns) {
    busy_record(sh, pid)->ns[gpu] += ns;
}
