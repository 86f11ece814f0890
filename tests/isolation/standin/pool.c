/* One memory pool and one serial timeline per simulated GPU, shared by every process.
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

/* Contexts of other processes with work on GPU `g` that ends after `t`, and the end of this
 * process's own latest kernel there (its kernels run one after another). */
static int contenders(const struct si_gpu_state *g, int pid, uint64_t t, uint64_t *own_end) {
    int others[SI_KRING], n = 0;
    uint64_t count = g->khead < SI_KRING ? g->khead : SI_KRING;
    for (uint64_t i = 0; i < count; i++) {
        const struct si_kernel *k = &g->kring[i];
        if (k->pid == pid) {
            *own_end = k->end > *own_end ? k->end : *own_end;
            continue;
        }
        if (k->end <= t)
            continue;
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = others[j] == k->pid;
        if (!seen)
            others[n++] = k->pid;
    }
    return n;
}

/* Queue `duration_ns` of work on GPU `gpu`'s timeline and return its end time.
 *
 * Without MPS the GPU time-slices between the contexts of different processes: one context's
 * kernels run at a time, and contexts that have work take turns (CUDA C++ Programming Guide,
 * "Compute Preemption" and the MPS documentation, "1.1 At a glance": without MPS, kernels of
 * different processes' contexts do not run concurrently but are time-sliced). A context's own
 * kernels run one after another, in order. So a kernel starts when its context's previous
 * kernel has ended (or now), and while other contexts have work queued its span on the timeline
 * stretches by their turns: with k contexts taking turns it lasts k times its own work. Events
 * bracketing it therefore measure the other contexts' time slices too, as NVIDIA documents for
 * cuEventElapsedTime ("any number of other different stream operations could execute in between
 * the two measured events"). The GPU's own busy time (`work`) is the kernel's duration only. */
uint64_t si_timeline_run(struct si_node *n, int gpu, uint64_t duration_ns) {
    struct si_gpu_state *g = &n->sh->gpu[gpu];
    int pid = getpid();
    uint64_t now = si_now_ns(), own_end = 0;
    contenders(g, pid, now, &own_end);
    uint64_t start = own_end > now ? own_end : now;
    uint64_t turns = 1 + (uint64_t)contenders(g, pid, start, &own_end);
    struct si_kernel *k = &g->kring[g->khead++ % SI_KRING];
    k->start = start;
    k->end = start + turns * duration_ns;
    k->work = duration_ns;
    k->pid = pid;
    g->busy_until = k->end > g->busy_until ? k->end : g->busy_until;
    busy_record(n->sh, pid)->ns[gpu] += duration_ns;
    return k->end;
}

/* Nanoseconds GPU `gpu` was busy in [from, to) with kernels of `pid` (any pid when 0): each
 * kernel's work, spread evenly over its span (the turns it shared with other contexts). */
uint64_t si_busy_window(struct si_shared *sh, int gpu, int pid, uint64_t from, uint64_t to) {
    struct si_gpu_state *g = &sh->gpu[gpu];
    uint64_t total = 0;
    uint64_t count = g->khead < SI_KRING ? g->khead : SI_KRING;
    for (uint64_t i = 0; i < count; i++) {
        const struct si_kernel *k = &g->kring[i];
        if (pid && k->pid != pid)
            continue;
        uint64_t s = k->start > from ? k->start : from;
        uint64_t e = k->end < to ? k->end : to;
        if (e > s && k->end > k->start)
            total += (uint64_t)((double)(e - s) * (double)k->work / (double)(k->end - k->start));
    }
    return total;
}
