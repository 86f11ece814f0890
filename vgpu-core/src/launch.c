/* Per-process measurement of launches. Each measured launch is bracketed by two events on its
 * stream; when the end event has completed, the elapsed time between them is the launch's busy
 * time, charged to the container's budget. Pending launches per context are bounded, so a process
 * cannot run far ahead of its measurements.
 *
 * Three rules keep the measurement from breaking programs or switching itself off:
 * - Nothing is recorded on a stream that is being captured (cuStreamIsCapturing): captured work
 *   does not run; it is charged when its graph is launched (cuGraphLaunch is a launch like any
 *   other). Our own event queries and syncs (potentially unsafe calls) run in the RELAXED capture
 *   interaction mode (cuThreadExchangeStreamCaptureMode), so a capture in GLOBAL or THREAD_LOCAL
 *   mode on this or another thread does not prohibit them (CUDA Programming Guide, stream
 *   capture: querying or synchronising during such a capture is prohibited and invalidates it);
 *   the application's own calls keep its mode. Our events are never recorded inside a capture,
 *   so they are never captured events, which no mode allows to query.
 * - A launch that cannot be measured (no event could be created or recorded) is charged an
 *   estimate: its signature's last measured time, else its time to completion on the host
 *   (cuStreamSynchronize); one `vgpu-core:` line on stderr says so, once per process.
 * - Tracks live as long as their contexts (contexts.c ends them before cuCtxDestroy and
 *   cuDevicePrimaryCtxReset), there is no fixed number of them, and an event that fails to record
 *   (its context was reset behind our back) is destroyed with its pool, never reused. */
#include "launch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "hooks.h"
#include "signature.h"
#include "state.h"

#define RING 16
#define POOL (2 * RING + 2)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define FALLBACK_NS 1000000 /* a launch neither measured nor timed: 1 ms */

typedef CUresult (*ev_create_fn)(CUevent *, unsigned int);
typedef CUresult (*ev_record_fn)(CUevent, CUstream);
typedef CUresult (*ev_query_fn)(CUevent);
typedef CUresult (*ev_elapsed_fn)(float *, CUevent, CUevent);
typedef CUresult (*get_ctx_fn)(CUcontext *);
typedef CUresult (*capturing_fn)(CUstream, int *);
typedef CUresult (*exchange_fn)(int *);
typedef CUresult (*sync_fn)(CUstream);

typedef struct {
    CUevent start, end;
    int index;
    uint64_t signature;
} pending;

typedef struct track {
    CUcontext ctx;
    pending ring[RING];
    int head, count;
    CUevent pool[POOL];
    int pooled;
    struct track *next;
} track;

static track *tracks; /* most recently used first */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static CUresult event_error; /* why the last event could not be created or recorded */
static int told;

void vgpu_launch_forget(void)
{
    for (track *t = tracks, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    tracks = NULL;
    vgpu_signature_forget();
    pthread_mutex_init(&mu, NULL);
}

/* Our calls run in the RELAXED interaction mode; returns the mode to restore (-1: none). */
static int relax(void)
{
    exchange_fn exchange = REAL_CU(exchange_fn, cuThreadExchangeStreamCaptureMode);
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    return exchange && exchange(&mode) == CUDA_SUCCESS ? mode : -1;
}

static void unrelax(int mode)
{
    exchange_fn exchange = REAL_CU(exchange_fn, cuThreadExchangeStreamCaptureMode);
    if (mode >= 0 && exchange)
        exchange(&mode);
}

/* 1 when work on `stream` is captured, not run (a driver without capture captures nothing). */
static int captured(CUstream stream)
{
    capturing_fn is_capturing = REAL_CU(capturing_fn, cuStreamIsCapturing);
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!is_capturing)
        return 0;
    CUresult rc = is_capturing(stream, &status);
    if (rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        return 1; /* the legacy stream while a blocking stream captures: the launch is refused */
    return rc == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static void destroy_event(CUevent ev)
{
    ev_query_fn destroy = REAL_CU(ev_query_fn, cuEventDestroy_v2);
    if (ev && destroy)
        destroy(ev);
}

static track *track_of(CUcontext ctx)
{
    for (track **p = &tracks; *p; p = &(*p)->next) {
        track *t = *p;
        if (t->ctx == ctx) {
            *p = t->next; /* move to the front */
            t->next = tracks;
            tracks = t;
            return t;
        }
    }
    track *t = calloc(1, sizeof *t);
    if (t) {
        t->ctx = ctx;
        t->next = tracks;
        tracks = t;
    }
    return t;
}

static CUevent take_event(track *t)
{
    if (t->pooled > 0)
        return t->pool[--t->pooled];
    CUevent ev = NULL;
    ev_create_fn create = REAL_CU(ev_create_fn, cuEventCreate);
    CUresult rc = create ? create(&ev, 0) : CUDA_ERROR_NOT_INITIALIZED;
    if (rc != CUDA_SUCCESS)
        event_error = rc;
    return rc == CUDA_SUCCESS ? ev : NULL;
}

static void give_event(track *t, CUevent ev)
{
    if (ev && t->pooled < POOL)
        t->pool[t->pooled++] = ev;
    else
        destroy_event(ev);
}

static void drop_pool(track *t)
{
    while (t->pooled > 0)
        destroy_event(t->pool[--t->pooled]);
}

/* An event recorded on `stream`, or NULL. A pooled event that fails to record belongs to an
 * earlier life of the context: it and the rest of the pool are destroyed, and a new one tried. */
static CUevent recorded_event(track *t, CUstream stream)
{
    ev_record_fn record = REAL_CU(ev_record_fn, cuEventRecord);
    for (int fresh = 0; record && fresh < 2; fresh++) {
        CUevent ev = take_event(t);
        if (!ev)
            return NULL;
        CUresult rc = record(ev, stream);
        if (rc == CUDA_SUCCESS)
            return ev;
        event_error = rc;
        destroy_event(ev);
        drop_pool(t);
    }
    return NULL;
}

/* Says once per process that launches are charged by estimate, and why. */
static void tell_once(void)
{
    if (__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        return;
    fprintf(stderr, "vgpu-core: cannot measure launches with CUDA events (CUDA error %d); "
                    "charging each its last measured time, or its time to completion\n",
            event_error);
}

/* Charges a launch that ran but was not measured: its signature's last measured time once it
 * has a full window of measurements, else its time to completion on the host, which then joins
 * the window (one host time can be inflated by queued work or a descheduled process; the least
 * of a window is not). */
static void charge_estimate(const vgpu_state *s, const vgpu_launch *l)
{
    int64_t ns = vgpu_signature_known(l->signature);
    if (!vgpu_signature_settled(l->signature)) {
        sync_fn sync = REAL_CU(sync_fn, cuStreamSynchronize);
        int mode = relax();
        int timed = sync && sync(l->stream) == CUDA_SUCCESS;
        unrelax(mode);
        int64_t host = (int64_t)(vgpu_now_ns() - l->begun_ns);
        ns = timed ? vgpu_signature_charge(l->signature, host) : ns > 0 ? ns : FALLBACK_NS;
    }
    vgpu_budget_charge(s, l->index, ns);
    tell_once();
}

/* Charges completed launches, oldest first; with `block`, waits for the oldest. A launch whose
 * events fail (their context ended under us) is charged its signature's last measured time. */
static void settle_relaxed(const vgpu_state *s, track *t, int block)
{
    ev_query_fn query = REAL_CU(ev_query_fn, cuEventQuery);
    ev_query_fn sync = REAL_CU(ev_query_fn, cuEventSynchronize);
    ev_elapsed_fn elapsed = REAL_CU(ev_elapsed_fn, cuEventElapsedTime);
    while (t->count > 0) {
        pending *p = &t->ring[t->head];
        CUresult rc = block && sync ? sync(p->end) : query(p->end);
        block = block > 1 ? block : 0; /* 2: wait for every pending launch */
        if (rc == CUDA_ERROR_NOT_READY)
            break;
        float ms = 0;
        if (rc == CUDA_SUCCESS)
            rc = elapsed(&ms, p->start, p->end);
        int64_t ns = rc == CUDA_SUCCESS ? (int64_t)((double)ms * 1e6) : 0;
        if (rc == CUDA_SUCCESS && ns > 0)
            vgpu_budget_charge(s, p->index, vgpu_signature_charge(p->signature, ns));
        else if (rc != CUDA_SUCCESS)
            vgpu_budget_charge(s, p->index, vgpu_signature_known(p->signature));
        if (rc == CUDA_SUCCESS) {
            give_event(t, p->start);
            give_event(t, p->end);
        } else {
            destroy_event(p->start);
            destroy_event(p->end);
        }
        t->head = (t->head + 1) % RING;
        t->count--;
    }
}

/* Queries and syncs are potentially unsafe during a capture: run them in the RELAXED mode. */
static void settle(const vgpu_state *s, track *t, int block)
{
    if (t->count == 0)
        return;
    int mode = relax();
    settle_relaxed(s, t, block);
    unrelax(mode);
}

static track *current_track(void)
{
    get_ctx_fn get = REAL_CU(get_ctx_fn, cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (!get || get(&ctx) != CUDA_SUCCESS || !ctx)
        return NULL;
    return track_of(ctx);
}

/* Waits until the container has budget on `index`, charging what completed meanwhile. */
static void wait_for_budget(const vgpu_state *s, track *t, int index)
{
    for (;;) {
        pthread_mutex_lock(&mu);
        if (t)
            settle(s, t, t->count == RING);
        pthread_mutex_unlock(&mu);
        if (vgpu_budget_left(s, index))
            return;
        vgpu_budget_sleep(s);
        vgpu_budget_refill_if_due(s, vgpu_now_ns());
    }
}

CUresult vgpu_launch_begin(vgpu_launch *l, CUstream stream, int per_thread_stream,
                           uint64_t signature)
{
    const vgpu_state *s = vgpu_state_get();
    memset(l, 0, sizeof *l);
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    CUresult rc = vgpu_current_index(&l->index);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t now = vgpu_now_ns();
    __atomic_store_n(&s->activity[l->index], now, __ATOMIC_RELAXED);
    vgpu_budget_refill_if_due(s, now);
    if (vgpu_budget_allowance(s, l->index) >= 100)
        return CUDA_SUCCESS; /* no limit: no measurement, nearly no cost */
    l->stream = stream == NULL && per_thread_stream ? CU_STREAM_PER_THREAD : stream;
    if (captured(l->stream))
        return CUDA_SUCCESS; /* charged when its graph is launched */
    pthread_mutex_lock(&mu);
    track *t = current_track();
    pthread_mutex_unlock(&mu);
    wait_for_budget(s, t, l->index);
    pthread_mutex_lock(&mu);
    if (t && t->count == RING)
        settle(s, t, 1); /* other threads filled it since we waited */
    l->start = t ? recorded_event(t, l->stream) : NULL;
    l->track = t;
    l->signature = signature;
    l->charge = l->start ? VGPU_MEASURED : VGPU_ESTIMATED;
    l->begun_ns = vgpu_now_ns();
    return CUDA_SUCCESS;
}

void vgpu_launch_end(vgpu_launch *l, CUresult rc)
{
    if (l->charge == VGPU_UNCHARGED)
        return;
    const vgpu_state *s = vgpu_state_get();
    track *t = l->track;
    CUevent end = NULL;
    if (l->charge == VGPU_MEASURED && rc == CUDA_SUCCESS && t->count < RING)
        end = recorded_event(t, l->stream);
    if (end) {
        int tail = (t->head + t->count) % RING;
        t->ring[tail] = (pending){l->start, end, l->index, l->signature};
        t->count++;
    } else {
        if (l->charge == VGPU_MEASURED)
            give_event(t, l->start);
        if (rc == CUDA_SUCCESS)
            charge_estimate(s, l);
    }
    pthread_mutex_unlock(&mu);
}

static track *unlink_track(CUcontext ctx)
{
    for (track **p = &tracks; *p; p = &(*p)->next)
        if ((*p)->ctx == ctx) {
            track *t = *p;
            *p = t->next;
            return t;
        }
    return NULL;
}

void vgpu_launch_context_ending(CUcontext ctx, int destroying)
{
    const vgpu_state *s = vgpu_state_get();
    if (!s || !ctx)
        return;
    pthread_mutex_lock(&mu);
    track *t = destroying ? unlink_track(ctx) : NULL;
    for (track *u = tracks; !destroying && u && !t; u = u->next)
        t = u->ctx == ctx ? u : NULL;
    if (t)
        settle(s, t, 2);
    if (t && destroying) {
        drop_pool(t);
        free(t);
    }
    pthread_mutex_unlock(&mu);
}

void vgpu_launch_context_gone(CUcontext ctx)
{
    pthread_mutex_lock(&mu);
    free(unlink_track(ctx));
    pthread_mutex_unlock(&mu);
}
