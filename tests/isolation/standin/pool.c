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
        sh->gpu[a->gpu].used -= a->bytes;
        sh->proc[a->proc].used[a->gpu] -= a->bytes;
        if (gpu_out)
            *gpu_out = a->gpu;
        memset(a, 0, sizeof(*a));
        return 0;
    }
    return -1;
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
