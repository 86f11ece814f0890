/* Tracks are a list, most recently used first, with no fixed number: a process may have any
 * number of contexts, and each context's track is freed when the context ends (launch.c, called
 * from contexts.c). An event that fails to record belongs to an earlier life of its context (one
 * reset behind our back): it and the rest of its pool are destroyed, never reused. */
#include "tracks.h"

#include <stdlib.h>

#include "hooks.h"

typedef CUresult (*ev_create_fn)(CUevent *, unsigned int);
typedef CUresult (*ev_record_fn)(CUevent, CUstream);
typedef CUresult (*ev_destroy_fn)(CUevent);
typedef CUresult (*get_ctx_fn)(CUcontext *);
typedef CUresult (*push_fn)(CUcontext);

static vgpu_track *tracks;
static CUresult event_error;

void vgpu_event_destroy(CUevent ev)
{
    ev_destroy_fn destroy = REAL_CU(ev_destroy_fn, cuEventDestroy_v2);
    if (ev && destroy)
        destroy(ev);
}

static vgpu_track *track_of(CUcontext ctx)
{
    for (vgpu_track **p = &tracks; *p; p = &(*p)->next) {
        vgpu_track *t = *p;
        if (t->ctx == ctx) {
            *p = t->next; /* move to the front */
            t->next = tracks;
            tracks = t;
            return t;
        }
    }
    vgpu_track *t = calloc(1, sizeof *t);
    if (t) {
        t->ctx = ctx;
        t->next = tracks;
        tracks = t;
    }
    return t;
}

/* A pooled event, or a new one created in the track's context ("for the current context",
 * cuEventCreate), pushed for the moment when another is current: an event records only on a
 * stream of its own device (CUDA Programming Guide, "Stream and Event Behavior"). */
static CUevent take_event(vgpu_track *t)
{
    if (t->pooled > 0)
        return t->pool[--t->pooled];
    CUevent ev = NULL;
    ev_create_fn create = REAL_CU(ev_create_fn, cuEventCreate);
    get_ctx_fn get = REAL_CU(get_ctx_fn, cuCtxGetCurrent);
    push_fn push = REAL_CU(push_fn, cuCtxPushCurrent_v2);
    get_ctx_fn pop = REAL_CU(get_ctx_fn, cuCtxPopCurrent_v2);
    CUcontext current = NULL, popped = NULL;
    int pushed = get && push && pop && get(&current) == CUDA_SUCCESS && current != t->ctx &&
                 push(t->ctx) == CUDA_SUCCESS;
    CUresult rc = create ? create(&ev, 0) : CUDA_ERROR_NOT_INITIALIZED;
    if (pushed)
        pop(&popped);
    if (rc != CUDA_SUCCESS)
        event_error = rc;
    return rc == CUDA_SUCCESS ? ev : NULL;
}

void vgpu_track_give(vgpu_track *t, CUevent ev)
{
    if (ev && t->pooled < VGPU_POOL)
        t->pool[t->pooled++] = ev;
    else
        vgpu_event_destroy(ev);
}

void vgpu_track_drop_pool(vgpu_track *t)
{
    while (t->pooled > 0)
        vgpu_event_destroy(t->pool[--t->pooled]);
    vgpu_event_destroy(t->mark);
    t->mark = NULL;
}

/* An event recorded on `stream`, or NULL. A pooled event that fails to record belongs to an
 * earlier life of the context: it and the rest of the pool are destroyed, and a new one tried. */
CUevent vgpu_track_recorded_event(vgpu_track *t, CUstream stream)
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
        vgpu_event_destroy(ev);
        vgpu_track_drop_pool(t);
    }
    return NULL;
}

vgpu_track *vgpu_track_of(CUcontext ctx)
{
    return ctx ? track_of(ctx) : NULL;
}

vgpu_track *vgpu_track_find(CUcontext ctx, int unlink)
{
    for (vgpu_track **p = &tracks; *p; p = &(*p)->next)
        if ((*p)->ctx == ctx) {
            vgpu_track *t = *p;
            if (unlink)
                *p = t->next;
            return t;
        }
    return NULL;
}

void vgpu_tracks_forget(void)
{
    for (vgpu_track *t = tracks, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    tracks = NULL;
}

CUresult vgpu_event_error(void)
{
    return event_error;
}
