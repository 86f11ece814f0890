/* Per-context measurement tracks: launches whose events are pending, and a pool of events for
 * the next ones. All under the launch lock (launch.c). A track lives as long as its context. */
#ifndef VGPU_TRACKS_H
#define VGPU_TRACKS_H

#include <stdint.h>

#include "driver_api.h"

#define VGPU_RING 16 /* measured launches pending per context */
#define VGPU_POOL (2 * VGPU_RING + 2)

typedef struct {
    CUevent start, end;
    int index;
    uint64_t signature;
    CUstream stream;
    uint64_t epoch; /* vgpu_signature_epoch() when it began */
} vgpu_pending;

typedef struct vgpu_track {
    CUcontext ctx;
    vgpu_pending ring[VGPU_RING];
    int head, count;
    uint64_t settled; /* launches settled in its life: what an ending waits for (launch.c) */
    CUevent pool[VGPU_POOL];
    int pooled;
    CUevent mark;          /* the end of the settled launch that ended last, or NULL (launch.c) */
    CUstream mark_stream;  /* its stream */
    struct vgpu_track *next;
} vgpu_track;

/* The context's track (created on first use), or NULL without a context or memory. */
vgpu_track *vgpu_track_of(CUcontext ctx);
/* The context's track, or NULL; with `unlink`, it is also taken out of the list (then free it). */
vgpu_track *vgpu_track_find(CUcontext ctx, int unlink);
/* Frees every track without touching their events (a forked child has no contexts). */
void vgpu_tracks_forget(void);

/* An event recorded on `stream`, or NULL (then vgpu_event_error() says why). */
CUevent vgpu_track_recorded_event(vgpu_track *t, CUstream stream);
/* Back to the pool (or destroyed when the pool is full). */
void vgpu_track_give(vgpu_track *t, CUevent ev);
/* Destroys the pooled events and the mark. */
void vgpu_track_drop_pool(vgpu_track *t);
void vgpu_event_destroy(CUevent ev);
/* The driver's answer when an event last could not be created or recorded. */
CUresult vgpu_event_error(void);

#endif
