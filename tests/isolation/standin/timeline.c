/* Each simulated GPU's timeline, shared by every process and simulated lazily: whoever takes the
 * state lock first advances it to now.
 *
 * Without MPS the GPU time-slices between the contexts of different processes: kernels of
 * different processes' contexts never run at the same time, and contexts that have work take
 * turns (NVIDIA's MPS documentation, "Introduction: At a glance" and "Concurrency": without
 * MPS, work from different processes is time-sliced; CUDA C++ Programming Guide, "Compute
 * Preemption": a context's work can be preempted at instruction level to let another context
 * run). A context's own kernels run in order. The simulation takes the turns as fine-grained:
 * while k processes have kernels queued, the first kernel of each advances at 1/k of the GPU,
 * so a kernel's span on the timeline holds the other contexts' turns too. Events bracketing it
 * therefore measure those turns, as NVIDIA documents for cuEventElapsedTime ("any number of other
 * different stream operations could execute in between the two measured events"), while the
 * GPU's busy time (NVML, the busy records) counts each kernel's own work only.
 *
 * All functions run under the state lock, except si_timeline_end/wait, which take it. */
#include <string.h>
#include <unistd.h>

#include "standin.h"

#define SI_MIN_NAP_NS 20000ull

static struct si_kernel *at(struct si_gpu_state *g, uint64_t i) {
    return &g->kring[i % SI_KRING];
}

/* Counts a kernel of `pid` queued (+1) or done (-1) in the table of processes with work. */
static void count(struct si_gpu_state *g, int32_t pid, int delta) {
    for (int i = 0; i < g->nqueued; i++) {
        if (g->queued[i].pid != pid)
            continue;
        g->queued[i].kernels += (uint32_t)delta;
        if (g->queued[i].kernels == 0)
            g->queued[i] = g->queued[--g->nqueued];
        return;
    }
    if (delta > 0 && g->nqueued < SI_MAX_PROCS) {
        g->queued[g->nqueued].pid = pid;
        g->queued[g->nqueued++].kernels = 1;
    }
}

/* Marks a kernel done at `t`. */
static void finish(struct si_gpu_state *g, struct si_kernel *k, uint64_t t) {
    k->left = 0;
    k->end = t;
    count(g, k->pid, -1);
}

/* The first queued kernel of each process (up to SI_MAX_PROCS); their count. */
static int heads(struct si_gpu_state *g, uint64_t *out) {
    int n = 0;
    for (uint64_t i = g->kfirst; i < g->khead; i++) {
        const struct si_kernel *k = at(g, i);
        if (k->end)
            continue;
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = at(g, out[j])->pid == k->pid;
        if (!seen && n < SI_MAX_PROCS)
            out[n++] = i;
    }
    return n;
}

/* One process alone has kernels queued: they run one after another at the GPU's full rate. */
static void serial(struct si_gpu_state *g, uint64_t to) {
    for (uint64_t i = g->kfirst; i < g->khead && g->sim_ns < to; i++) {
        struct si_kernel *k = at(g, i);
        if (k->end)
            continue;
        if (!k->start)
            k->start = g->sim_ns;
        uint64_t room = to - g->sim_ns;
        uint64_t served = k->left < room ? k->left : room;
        k->left -= served;
        g->sim_ns += served;
        if (k->left == 0)
            finish(g, k, g->sim_ns);
    }
    g->sim_ns = to; /* idle for the rest, if the queue ran dry */
    while (g->kfirst < g->khead && at(g, g->kfirst)->end)
        g->kfirst++;
}

/* Runs the timeline up to `to`: the heads share the GPU equally until one of them ends. */
static void advance(struct si_gpu_state *g, uint64_t to) {
    uint64_t h[SI_MAX_PROCS];
    while (g->sim_ns < to) {
        if (g->nqueued <= 1) {
            serial(g, to); /* no other process can queue work while the lock is held */
            break;
        }
        int n = heads(g, h);
        uint64_t step = to - g->sim_ns;
        for (int j = 0; j < n; j++)
            if (at(g, h[j])->left * (uint64_t)n < step)
                step = at(g, h[j])->left * (uint64_t)n;
        for (int j = 0; j < n; j++) {
            struct si_kernel *k = at(g, h[j]);
            uint64_t served = k->left * (uint64_t)n <= step ? k->left : step / (uint64_t)n;
            if (!k->start)
                k->start = g->sim_ns;
            k->left -= served;
            if (k->left == 0)
                finish(g, k, g->sim_ns + step);
        }
        g->sim_ns += step;
        while (g->kfirst < g->khead && at(g, g->kfirst)->end)
            g->kfirst++;
    }
}

/* 1 with the end time if the kernel of `ticket` is done (ticket 0, or one long gone: at 0). */
static int done_at(struct si_gpu_state *g, uint64_t ticket, uint64_t *end) {
    if (ticket == 0 || g->khead - (ticket - 1) > SI_KRING) {
        *end = 0;
        return 1;
    }
    *end = at(g, ticket - 1)->end;
    return *end != 0;
}

/* Queues `duration_ns` of work for this process on GPU `gpu` and returns its ticket, or 0 while
 * the kernel of ticket `after` (a full stream's oldest) is still queued: wait for it first. */
uint64_t si_timeline_run(struct si_node *n, int gpu, uint64_t duration_ns, uint64_t after) {
    struct si_gpu_state *g = &n->sh->gpu[gpu];
    uint64_t now = si_now_ns(), end;
    advance(g, now);
    if (!done_at(g, after, &end))
        return 0;
    if (g->khead - g->kfirst >= SI_KRING) { /* never in the tests: the oldest counts as done */
        finish(g, at(g, g->kfirst++), now);
    }
    struct si_kernel *k = at(g, g->khead);
    memset(k, 0, sizeof(*k));
    k->pid = getpid();
    k->work = k->left = duration_ns;
    count(g, k->pid, 1);
    if (duration_ns == 0) {
        k->start = now;
        finish(g, k, now);
    }
    si_busy_add(n->sh, k->pid, gpu, duration_ns);
    return ++g->khead;
}

int si_timeline_end(struct si_node *n, int gpu, uint64_t ticket, uint64_t *end) {
    struct si_shared *sh = si_lock(n);
    advance(&sh->gpu[gpu], si_now_ns());
    int done = done_at(&sh->gpu[gpu], ticket, end);
    si_unlock(n);
    return done;
}

/* Sleeps until the kernel of `ticket` is done and returns its end. Each nap lasts as long as
 * the kernel and those queued before it in its context would take if the GPU's contention stayed
 * as it is now, so a wait costs a few wake-ups. */
uint64_t si_timeline_wait(struct si_node *n, int gpu, uint64_t ticket) {
    for (;;) {
        struct si_shared *sh = si_lock(n);
        struct si_gpu_state *g = &sh->gpu[gpu];
        uint64_t now = si_now_ns(), end = 0, ahead = 0;
        advance(g, now);
        if (done_at(g, ticket, &end)) {
            si_unlock(n);
            return end;
        }
        int contexts = g->nqueued;
        int32_t pid = at(g, ticket - 1)->pid;
        for (uint64_t i = g->kfirst; i < ticket; i++)
            if (!at(g, i)->end && at(g, i)->pid == pid)
                ahead += at(g, i)->left;
        si_unlock(n);
        uint64_t nap = ahead * (uint64_t)(contexts > 0 ? contexts : 1);
        si_sleep_until(now + (nap > SI_MIN_NAP_NS ? nap : SI_MIN_NAP_NS));
    }
}

uint64_t si_kernel_last(const struct si_shared *sh, int gpu, const struct si_kernel *k) {
    return k->end ? k->end : (k->start ? sh->gpu[gpu].sim_ns : 0);
}

/* Nanoseconds GPU `gpu` was busy in [from, to) with kernels of `pid` (any pid when 0): the work
 * each kernel has done, spread evenly over its span so far. */
uint64_t si_busy_window(struct si_shared *sh, int gpu, int pid, uint64_t from, uint64_t to) {
    struct si_gpu_state *g = &sh->gpu[gpu];
    advance(g, si_now_ns());
    uint64_t total = 0;
    uint64_t count = g->khead < SI_KRING ? g->khead : SI_KRING;
    for (uint64_t i = 0; i < count; i++) {
        const struct si_kernel *k = &g->kring[i];
        uint64_t last = si_kernel_last(sh, gpu, k);
        if ((pid && k->pid != pid) || !k->start || last <= k->start)
            continue;
        uint64_t s = k->start > from ? k->start : from;
        uint64_t e = last < to ? last : to;
        if (e > s)
            total += (uint64_t)((double)(e - s) * (double)(k->work - k->left) /
                                (double)(last - k->start));
    }
    return total;
}
