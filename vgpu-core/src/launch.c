/* Per-process measurement of launches. Each measured launch is bracketed by two events on its
 * stream; when the end event has completed, the elapsed time between them is the launch's busy
 * time, charged to the container's budget. Pending launches per context are bounded, so a process
 * cannot run far ahead of its measurements. Spans of launches on several streams overlap; the
 * overlap is charged once (uncovered, below).
 *
 * Three rules keep the measurement from breaking programs or switching itself off:
 * - Nothing is recorded on a stream that is being captured (cuStreamIsCapturing): captured work
 *   does not run; it is charged when its graph is launched (cuGraphLaunch is a launch like any
 *   other). Our own calls (event creation, records, queries and syncs; querying and synchronising
 *   are potentially unsafe) run in the RELAXED capture interaction mode
 *   (cuThreadExchangeStreamCaptureMode), so a capture in GLOBAL or THREAD_LOCAL mode on this or
 *   another thread does not prohibit them (CUDA Programming Guide, stream capture: querying or
 *   synchronising during such a capture is prohibited and invalidates it); the application's own
 *   launch keeps its mode. Our events are never recorded inside a capture, so they are never
 *   captured events, which no mode allows to query.
 * - A launch that cannot be measured (no event could be created or recorded) is charged an
 *   estimate: its signature's last measured time, else its time to completion on the host
 *   (cuStreamSynchronize); one `vgpu-core:` line on stderr says so, once per process.
 * - Tracks (tracks.c) live as long as their contexts (contexts.c ends them before cuCtxDestroy
 *   and cuDevicePrimaryCtxReset), there is no fixed number of them, and an event that fails to
 *   record (its context was reset behind our back) is destroyed with its pool, never reused. */
#include "launch.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "capture.h"
#include "hooks.h"
#include "signature.h"
#include "state.h"
#include "tracks.h"

#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define FALLBACK_NS 1000000 /* a launch neither measured nor timed: 1 ms */

typedef CUresult (*get_ctx_fn)(CUcontext *);
typedef CUresult (*stream_ctx_fn)(CUstream, CUcontext *);
typedef CUresult (*ev_query_fn)(CUevent);
typedef CUresult (*ev_elapsed_fn)(float *, CUevent, CUevent);
typedef CUresult (*sync_fn)(CUstream);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int told;

void vgpu_launch_forget(void)
{
    vgpu_tracks_forget();
    vgpu_signature_forget();
    pthread_mutex_init(&mu, NULL);
}

/* Says once per process that launches are charged by estimate, and why. */
static void tell_once(void)
{
    if (__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        return;
    fprintf(stderr, "vgpu-core: cannot measure launches with CUDA events (CUDA error %d); "
                    "charging each its last measured time, or its time to completion\n",
            vgpu_event_error());
}

/* Charges a launch that ran but was not measured: its signature's last measured time once it
 * has a full window of measurements, else its time to completion on the host, which then joins
 * the window (one host time can be inflated by queued work or a descheduled process; the least
 * of a window is not). Called without the process lock, which guards the signatures: waiting
 * for the launch to complete under it would hold up every other thread's launch (lock_with_room
 * says why). */
static void charge_estimate(const vgpu_state *s, const vgpu_launch *l)
{
    pthread_mutex_lock(&mu);
    int64_t ns = vgpu_signature_known(l->signature);
    int settled = vgpu_signature_settled(l->signature);
    pthread_mutex_unlock(&mu);
    if (!settled) {
        sync_fn sync = REAL_CU(sync_fn, cuStreamSynchronize);
        int timed = sync && sync(l->stream) == CUDA_SUCCESS;
        int64_t host = (int64_t)(vgpu_now_ns() - l->begun_ns);
        pthread_mutex_lock(&mu);
        ns = timed  ? vgpu_signature_charge(l->signature, l->epoch, host)
             : ns > 0 ? ns
                      : FALLBACK_NS;
        pthread_mutex_unlock(&mu);
    }
    vgpu_budget_charge(s, l->index, ns);
    tell_once();
}

static int64_t ms_to_ns(float ms)
{
    return (int64_t)((double)ms * 1e6);
}

/* Moves the track's mark to `end` (the launch's end event, now the mark's: not pooled). */
static void move_mark(vgpu_track *t, CUevent end, CUstream stream)
{
    vgpu_track_give(t, t->mark);
    t->mark = end;
    t->mark_stream = stream;
}

/* The part of a settled launch's span [start, end] after the track's mark, the end of the
 * settled launch that ended last; *kept says the launch's end became the mark. Launches on
 * several streams of a context run at once, so their spans overlap: charged whole, each stream's
 * span charged the time they shared once per stream (four streams about four times the wall
 * time). Charging only what no launch settled before covered charges the time the context had
 * work on the GPU once, which is what NVML's utilisation counts ("one or more kernels was
 * executing"). Launches settle in the order they were issued, so a launch on the mark's own
 * stream starts after it (a stream runs in order; the per-thread default stream is one handle
 * for many streams, so it is always asked); for others, cuEventElapsedTime between the mark and
 * the launch's events, which is negative when the second ran first. Whichever event fails (a
 * context reset), the mark is dropped and the whole span charged, as before. */
static int64_t uncovered(vgpu_track *t, const vgpu_pending *p, int64_t span, ev_elapsed_fn elapsed,
                         int *kept)
{
    float ms = 0;
    *kept = 0;
    int ordered = p->stream == t->mark_stream && p->stream != CU_STREAM_PER_THREAD;
    if (t->mark && !ordered) {
        if (elapsed(&ms, t->mark, p->start) != CUDA_SUCCESS)
            goto drop;
        if (ms < 0) { /* it started before the mark: only what ran past the mark is new */
            if (elapsed(&ms, t->mark, p->end) != CUDA_SUCCESS)
                goto drop;
            if (ms <= 0)
                return 0;
            int64_t past = ms_to_ns(ms);
            span = past < span ? past : span;
        }
    }
    move_mark(t, p->end, p->stream);
    *kept = 1;
    return span;
drop:
    vgpu_event_destroy(t->mark);
    t->mark = NULL;
    move_mark(t, p->end, p->stream); /* the launch's own events answered: a fresh mark */
    *kept = 1;
    return span;
}

/* What a completed launch of `span` ns is charged: its signature's least recent span (other
 * contexts' turns left out, signature.c), but never more than the part of its span no earlier
 * launch covered (uncovered). On one stream that part is the whole span, so nothing changes
 * there; a launch that waited behind the context's other streams is charged its wait once. */
static int64_t launch_charge(vgpu_track *t, const vgpu_pending *p, int64_t span,
                             ev_elapsed_fn elapsed, int *kept)
{
    int64_t fresh = uncovered(t, p, span, elapsed, kept);
    int64_t least = vgpu_signature_charge(p->signature, p->epoch, span);
    return fresh < least ? fresh : least;
}

/* Charges completed launches, oldest first, without waiting (the process lock is held: waiting
 * for the GPU is done outside it, lock_with_room). A launch whose events fail (their context
 * ended under us) is charged its signature's last measured time. */
static void settle(const vgpu_state *s, vgpu_track *t)
{
    ev_query_fn query = REAL_CU(ev_query_fn, cuEventQuery);
    ev_elapsed_fn elapsed = REAL_CU(ev_elapsed_fn, cuEventElapsedTime);
    while (t->count > 0) {
        vgpu_pending *p = &t->ring[t->head];
        CUresult rc = query(p->end);
        if (rc == CUDA_ERROR_NOT_READY)
            break;
        float ms = 0;
        int kept = 0;
        if (rc == CUDA_SUCCESS)
            rc = elapsed(&ms, p->start, p->end);
        int64_t ns = rc == CUDA_SUCCESS ? ms_to_ns(ms) : 0;
        if (rc == CUDA_SUCCESS && ns > 0)
            vgpu_budget_charge(s, p->index, launch_charge(t, p, ns, elapsed, &kept));
        else if (rc != CUDA_SUCCESS)
            vgpu_budget_charge(s, p->index, vgpu_signature_known(p->signature));
        if (rc == CUDA_SUCCESS) {
            vgpu_track_give(t, p->start);
            if (!kept)
                vgpu_track_give(t, p->end);
        } else {
            vgpu_event_destroy(p->start);
            vgpu_event_destroy(p->end);
        }
        t->head = (t->head + 1) % VGPU_RING;
        t->count--;
        t->settled++;
    }
}

/* A pause between two polls of a pending launch: yielding for the first millisecond (as a
 * spinning cuEventSynchronize would), then naps of 100 us. */
static void poll_pause(uint64_t *since)
{
    uint64_t now = vgpu_now_ns();
    *since = *since ? *since : now;
    if (now - *since < 1000000) {
        sched_yield();
    } else {
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
}

/* Returns with the process lock held and room in the track for one more pending launch,
 * charging what completed meanwhile. The lock is never held while waiting for the GPU: another
 * thread's launch, maybe on another GPU, must not wait for this context's queue (a thread per
 * GPU, as NCCL's "one device per thread": a collective kernel in this queue may wait for that
 * very launch, so waiting for it under the lock would deadlock). So the oldest pending launch
 * is polled, the lock let go in between (poll_pause). */
static void lock_with_room(const vgpu_state *s, vgpu_track *t)
{
    uint64_t since = 0;
    for (;;) {
        pthread_mutex_lock(&mu);
        if (!t)
            return;
        settle(s, t);
        if (t->count < VGPU_RING)
            return;
        pthread_mutex_unlock(&mu);
        poll_pause(&since);
    }
}

/* Waits until the container has budget on `index`, charging what completed meanwhile. */
static void wait_for_budget(const vgpu_state *s, vgpu_track *t, int index)
{
    for (;;) {
        lock_with_room(s, t);
        pthread_mutex_unlock(&mu);
        if (vgpu_budget_left(s, index))
            return;
        vgpu_budget_sleep(s);
        vgpu_budget_refill_if_due(s, vgpu_now_ns());
    }
}

/* The context a launch runs in (*ctx, NULL without one) and its GPU's limits index. A
 * context-independent kernel (cuLibraryGetKernel, cast to CUfunction) runs in its stream's
 * context, not the current one: "the context to launch the kernel on will either be taken from
 * the specified stream hStream or the current context in case of NULL stream" (CUDA Driver API
 * reference, cuLaunchKernel; likewise cuLaunchKernelEx and cuLaunchCooperativeKernel). So work
 * on a stream of another context, maybe of another GPU, is charged to that GPU's share and
 * measured with that context's events; the NULL, legacy and per-thread streams name the current
 * context. */
static CUresult launch_context(CUstream stream, CUcontext *ctx, int *index)
{
    get_ctx_fn current = REAL_CU(get_ctx_fn, cuCtxGetCurrent);
    stream_ctx_fn of_stream = REAL_CU(stream_ctx_fn, cuStreamGetCtx);
    CUcontext mine = NULL;
    CUdevice dev = 0;
    if (!current || current(&mine) != CUDA_SUCCESS)
        mine = NULL;
    *ctx = NULL;
    int own = (uintptr_t)stream <= (uintptr_t)CU_STREAM_PER_THREAD; /* NULL, legacy, per-thread */
    if (!own && of_stream && of_stream(stream, ctx) == CUDA_SUCCESS && *ctx && *ctx != mine) {
        CUresult rc = vgpu_context_device(*ctx, &dev);
        return rc != CUDA_SUCCESS ? rc : vgpu_device_index(dev, index);
    }
    *ctx = mine;
    return vgpu_current_index(index);
}

CUresult vgpu_launch_begin(vgpu_launch *l, CUstream stream, int per_thread_stream,
                           uint64_t signature)
{
    const vgpu_state *s = vgpu_state_get();
    CUcontext ctx = NULL;
    memset(l, 0, sizeof *l);
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    CUresult rc = launch_context(stream, &ctx, &l->index);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t now = vgpu_now_ns();
    __atomic_store_n(&s->activity[l->index], now, __ATOMIC_RELAXED);
    vgpu_budget_refill_if_due(s, now);
    if (vgpu_budget_allowance(s, l->index) >= 100)
        return CUDA_SUCCESS; /* no limit: no measurement, nearly no cost */
    l->stream = stream == NULL && per_thread_stream ? CU_STREAM_PER_THREAD : stream;
    if (vgpu_capture_active(l->stream))
        return CUDA_SUCCESS; /* charged when its graph is launched */
    int mode = vgpu_capture_relax(); /* for our own calls; the launch keeps the caller's mode */
    pthread_mutex_lock(&mu);
    vgpu_track *t = vgpu_track_of(ctx);
    pthread_mutex_unlock(&mu);
    wait_for_budget(s, t, l->index);
    lock_with_room(s, t); /* other threads may have filled it since we waited */
    l->start = t ? vgpu_track_recorded_event(t, l->stream) : NULL;
    vgpu_capture_unrelax(mode);
    l->track = t;
    l->signature = signature;
    l->epoch = vgpu_signature_epoch();
    l->charge = l->start ? VGPU_MEASURED : VGPU_ESTIMATED;
    l->begun_ns = vgpu_now_ns();
    return CUDA_SUCCESS;
}

void vgpu_launch_end(vgpu_launch *l, CUresult rc)
{
    if (l->charge == VGPU_UNCHARGED)
        return;
    const vgpu_state *s = vgpu_state_get();
    vgpu_track *t = l->track;
    int mode = vgpu_capture_relax();
    CUevent end = NULL;
    if (l->charge == VGPU_MEASURED && rc == CUDA_SUCCESS && t->count < VGPU_RING)
        end = vgpu_track_recorded_event(t, l->stream);
    if (end) {
        int tail = (t->head + t->count) % VGPU_RING;
        t->ring[tail] = (vgpu_pending){l->start, end, l->index, l->signature, l->stream, l->epoch};
        t->count++;
    } else if (l->charge == VGPU_MEASURED) {
        vgpu_track_give(t, l->start);
    }
    pthread_mutex_unlock(&mu);
    if (!end && rc == CUDA_SUCCESS)
        charge_estimate(s, l); /* still relaxed: it may synchronise */
    vgpu_capture_unrelax(mode);
}

/* Charges what the context had pending when it began to end, polled as in lock_with_room. A
 * destroyed context's track goes once nothing is pending (no other thread may use a context
 * while it is destroyed). A primary context's retain released may leave it active, in use by
 * other threads: what they launch after the release began is not waited for, or a thread that
 * keeps its GPU busy would hold the release for as long as it goes on launching. */
void vgpu_launch_context_ending(CUcontext ctx, int destroying)
{
    const vgpu_state *s = vgpu_state_get();
    if (!s || !ctx)
        return;
    int mode = vgpu_capture_relax();
    uint64_t since = 0, target = 0;
    vgpu_track *first = NULL;
    for (;;) {
        pthread_mutex_lock(&mu);
        vgpu_track *t = vgpu_track_find(ctx, 0);
        if (t)
            settle(s, t);
        if (t && !first) {
            first = t;
            target = t->settled + (uint64_t)t->count;
        }
        int done = !t || (destroying ? t->count == 0 : t != first || t->settled >= target);
        if (done) {
            if (t && destroying) {
                vgpu_track_find(ctx, 1);
                vgpu_track_drop_pool(t);
                free(t);
            }
            pthread_mutex_unlock(&mu);
            break;
        }
        pthread_mutex_unlock(&mu);
        poll_pause(&since);
    }
    vgpu_capture_unrelax(mode);
}

void vgpu_launch_restart(uint64_t signature)
{
    pthread_mutex_lock(&mu);
    vgpu_signature_restart(signature);
    pthread_mutex_unlock(&mu);
}

void vgpu_launch_context_gone(CUcontext ctx)
{
    pthread_mutex_lock(&mu);
    free(vgpu_track_find(ctx, 1));
    pthread_mutex_unlock(&mu);
}
