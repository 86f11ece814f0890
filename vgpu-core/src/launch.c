/* Per-process measurement of launches. Each measured launch is bracketed by two events on its
 * stream; when the end event has completed, the elapsed time between them is the launch's busy
 * time, charged to the container's budget. Pending launches per context are bounded, so a process
 * cannot run far ahead of its measurements. */
#include "launch.h"

#include <pthread.h>
#include <string.h>

#include "budget.h"
#include "hooks.h"
#include "signature.h"
#include "state.h"

#define RING 16
#define POOL (2 * RING + 2)
#define TRACKS 32
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

typedef CUresult (*ev_create_fn)(CUevent *, unsigned int);
typedef CUresult (*ev_record_fn)(CUevent, CUstream);
typedef CUresult (*ev_query_fn)(CUevent);
typedef CUresult (*ev_elapsed_fn)(float *, CUevent, CUevent);
typedef CUresult (*get_ctx_fn)(CUcontext *);

typedef struct {
    CUevent start, end;
    int index;
    uint64_t signature;
} pending;

typedef struct {
    CUcontext ctx;
    pending ring[RING];
    int head, count;
    CUevent pool[POOL];
    int pooled;
} track;

static track tracks[TRACKS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void vgpu_launch_forget(void)
{
    memset(tracks, 0, sizeof tracks);
    vgpu_signature_forget();
    pthread_mutex_init(&mu, NULL);
}

static track *track_of(CUcontext ctx)
{
    track *free_track = NULL;
    for (int i = 0; i < TRACKS; i++) {
        if (tracks[i].ctx == ctx)
            return &tracks[i];
        if (!tracks[i].ctx && !free_track)
            free_track = &tracks[i];
    }
    if (free_track)
        free_track->ctx = ctx;
    return free_track;
}

static CUevent take_event(track *t)
{
    if (t->pooled > 0)
        return t->pool[--t->pooled];
    CUevent ev = NULL;
    ev_create_fn create = REAL_CU(ev_create_fn, cuEventCreate);
    return create && create(&ev, 0) == CUDA_SUCCESS ? ev : NULL;
}

static void give_event(track *t, CUevent ev)
{
    if (ev && t->pooled < POOL)
        t->pool[t->pooled++] = ev;
}

/* Charges completed launches, oldest first; with `block`, waits for the oldest. */
static void settle(const vgpu_state *s, track *t, int block)
{
    ev_query_fn query = REAL_CU(ev_query_fn, cuEventQuery);
    ev_query_fn sync = REAL_CU(ev_query_fn, cuEventSynchronize);
    ev_elapsed_fn elapsed = REAL_CU(ev_elapsed_fn, cuEventElapsedTime);
    while (t->count > 0) {
        pending *p = &t->ring[t->head];
        CUresult rc = block && sync ? sync(p->end) : query(p->end);
        block = 0;
        if (rc == CUDA_ERROR_NOT_READY)
            break;
        float ms = 0;
        if (rc == CUDA_SUCCESS && elapsed(&ms, p->start, p->end) == CUDA_SUCCESS && ms > 0)
            vgpu_budget_charge(s, p->index,
                               vgpu_signature_charge(p->signature, (int64_t)((double)ms * 1e6)));
        give_event(t, p->start);
        give_event(t, p->end);
        t->head = (t->head + 1) % RING;
        t->count--;
    }
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
    pthread_mutex_lock(&mu);
    track *t = current_track();
    pthread_mutex_unlock(&mu);
    if (!t)
        return CUDA_SUCCESS;
    wait_for_budget(s, t, l->index);
    pthread_mutex_lock(&mu);
    if (t->count == RING)
        settle(s, t, 1); /* other threads filled it since we waited */
    l->stream = stream == NULL && per_thread_stream ? CU_STREAM_PER_THREAD : stream;
    l->start = take_event(t);
    ev_record_fn record = REAL_CU(ev_record_fn, cuEventRecord);
    if (!l->start || !record || record(l->start, l->stream) != CUDA_SUCCESS) {
        give_event(t, l->start);
        pthread_mutex_unlock(&mu);
        return CUDA_SUCCESS;
    }
    l->track = t;
    l->signature = signature;
    l->measure = 1;
    return CUDA_SUCCESS;
}

void vgpu_launch_end(vgpu_launch *l, CUresult rc)
{
    if (!l->measure)
        return;
    track *t = l->track;
    CUevent end = rc == CUDA_SUCCESS ? take_event(t) : NULL;
    ev_record_fn record = REAL_CU(ev_record_fn, cuEventRecord);
    if (end && record(end, l->stream) == CUDA_SUCCESS && t->count < RING) {
        int tail = (t->head + t->count) % RING;
        t->ring[tail] = (pending){l->start, end, l->index, l->signature};
        t->count++;
    } else {
        give_event(t, l->start);
        give_event(t, end);
    }
    pthread_mutex_unlock(&mu);
}
