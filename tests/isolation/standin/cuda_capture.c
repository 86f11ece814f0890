/* Stand-in libcuda.so.1: stream capture, as the CUDA Driver API reference documents it
 * (cuStreamBeginCapture, cuStreamEndCapture, cuStreamIsCapturing, cuStreamGetCaptureInfo,
 * cuThreadExchangeStreamCaptureMode) and the CUDA Programming Guide's "Stream Capture" section
 * ("Prohibited and Unhandled Operations", "Invalidation"):
 *
 * - work submitted to a capturing stream is not run but appended to the capture's graph
 *   (cuStreamBeginCapture: "all operations pushed into the stream will not be executed, but will
 *   instead be captured into a graph, which will be returned via cuStreamEndCapture");
 * - a thread's interaction mode (cuThreadExchangeStreamCaptureMode, GLOBAL by default) decides
 *   when it is prohibited from potentially unsafe calls: GLOBAL when the thread itself has an
 *   ongoing capture not begun RELAXED, or any other thread has a concurrent capture begun
 *   GLOBAL; THREAD_LOCAL only for its own non-RELAXED capture; RELAXED never. Querying or
 *   synchronising an event is such a call here (the Programming Guide forbids querying execution
 *   status during capture; PyTorch's CUDA caching allocator defers its cudaEventQuery calls while
 *   any capture is underway for this reason). A prohibited call answers
 *   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures that prohibit it;
 * - querying an event last recorded inside a capture conflicts with capture in every mode
 *   (CU_STREAM_CAPTURE_MODE_RELAXED's documentation) and answers CUDA_ERROR_CAPTURED_EVENT;
 * - an invalidated capture ends with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and a NULL graph, and
 *   work submitted to it meanwhile answers the same error ("Invalidation").
 *
 * - the per-thread default stream (CU_STREAM_PER_THREAD, and the NULL stream of the _ptsz entry
 *   points, "Stream synchronization behavior") can be captured: only CU_STREAM_LEGACY cannot
 *   (cuStreamBeginCapture). While the calling thread captures on it, it is a stream of its own
 *   (the thread's, `ptds` below); otherwise its work runs as the context's NULL stream's.
 *
 * - cuStreamBeginRecaptureToGraph (CUDA 13): "Begin graph capture on hStream to the existing
 *   hGraph. The node creation order while recapturing the graph must be identical to the original
 *   graph. The recapture will fail immediately for: Topology mismatches ... Parameter mismatches
 *   for memory allocation or free nodes"; "If the recapture fails for any reason, the graph will
 *   be in an undefined state and should be destroyed". Here each captured operation redoes the
 *   graph's next node (a kernel node takes the new work; an allocation node must have the same
 *   device and size, and keeps its address), and a mismatch invalidates the recapture
 *   (CUDA_ERROR_INVALID_VALUE); the graph is never freed by it. The callback is not called.
 *
 * Not modelled: capture on the legacy stream (refused, as documented), cross-stream capture
 * through events (fork/join), and the legacy stream's implicit dependency. */
#include <stdlib.h>

#include "cuda_local.h"

static __thread int thread_mode = SI_CAPTURE_GLOBAL;
static struct si_capture *captures; /* ongoing sequences, under si_cu_mu */
static unsigned long long next_id;

/* The calling thread's per-thread default stream, while it captures (bound to the context that
 * was current when the capture began). */
static __thread struct si_stream ptds;

struct si_stream *si_cu_ptds(void) { return ptds.capture ? &ptds : NULL; }

/* A stream capture can begin or end on: a created one, or this thread's per-thread stream. */
static struct si_stream *created(CUstream s) {
    if (s == SI_STREAM_PER_THREAD) {
        if (!ptds.capture)
            ptds.ctx = si_cu_current();
        return ptds.ctx ? &ptds : NULL;
    }
    return (uintptr_t)s > 2 ? s : NULL;
}

int si_cu_capture_append(struct si_stream *st, uint64_t ns, CUresult *rc) {
    struct si_capture *c = st->capture;
    if (!c)
        return 0;
    if (c->status != SI_CAPTURE_ACTIVE) {
        *rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c->recapture) {
        int same = c->pos < c->graph->n && !c->graph->node[c->pos].mem;
        if (same)
            c->graph->node[c->pos++].ns = ns;
        else
            c->status = SI_CAPTURE_INVALIDATED;
        *rc = same ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    } else if (c->graph->n == 64) { /* the stand-in's graph size; a real driver has no such cap */
        c->status = SI_CAPTURE_INVALIDATED;
        *rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        c->graph->node[c->graph->n++].ns = ns;
        *rc = CUDA_SUCCESS;
    }
    return 1;
}

/* cuMemAllocAsync: "During stream capture, this function results in the creation of an
 * allocation node. In this case, the allocation is owned by the graph instead of the memory pool.
 * The memory pool's properties are used to set the node's creation parameters" (CUDA Driver API
 * reference; cuMemAllocFromPoolAsync likewise); the Programming Guide's "Graph Memory Nodes":
 * "CUDA assigns virtual addresses for the graph allocation at node creation time", and
 * cuMemFreeAsync captured becomes a free node. No physical memory is taken here: a launch
 * reaching the node takes it (cuda_graph.c). */
int si_cu_capture_mem(struct si_stream *st, int dev, uint64_t bytes, CUdeviceptr *dptr,
                      CUresult *rc) {
    CUgraphNode node;
    pthread_mutex_lock(&si_cu_mu);
    struct si_capture *c = st ? st->capture : NULL;
    struct si_gnode *redo = c && c->recapture && c->pos < c->graph->n ? &c->graph->node[c->pos]
                                                                       : NULL;
    if (c && c->status != SI_CAPTURE_ACTIVE) {
        *rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c && c->recapture) {
        int same = redo && (bytes ? si_cu_graph_alloc_is(redo, dev, bytes)
                                  : redo->mem == SI_GRAPH_FREE && redo->dptr == *dptr);
        if (same && bytes)
            *dptr = redo->dptr;
        c->pos += same;
        c->status = same ? c->status : SI_CAPTURE_INVALIDATED;
        *rc = same ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    } else if (c && bytes)
        *rc = si_cu_graph_alloc(&node, c->graph, dev, bytes, dptr);
    else if (c)
        *rc = si_cu_graph_free_node(&node, c->graph, *dptr);
    pthread_mutex_unlock(&si_cu_mu);
    return c != NULL;
}

unsigned long long si_cu_capture_id(const struct si_stream *st) {
    return st && st->capture ? st->capture->id : 0;
}

void si_cu_capture_invalidate(unsigned long long id) {
    for (struct si_capture *c = captures; c; c = c->next)
        if (c->id == id)
            c->status = SI_CAPTURE_INVALIDATED;
}

CUresult si_cu_unsafe(void) {
    int prohibited = 0;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&si_cu_mu);
    for (struct si_capture *c = captures; c && thread_mode != SI_CAPTURE_RELAXED; c = c->next) {
        int mine = pthread_equal(c->thread, self);
        int local = mine && c->mode != SI_CAPTURE_RELAXED;
        int global = !mine && thread_mode == SI_CAPTURE_GLOBAL && c->mode == SI_CAPTURE_GLOBAL;
        if (local || global) {
            c->status = SI_CAPTURE_INVALIDATED;
            prohibited = 1;
        }
    }
    pthread_mutex_unlock(&si_cu_mu);
    return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

SI_EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
    if (!mode || *mode < SI_CAPTURE_GLOBAL || *mode > SI_CAPTURE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    int previous = thread_mode;
    thread_mode = *mode;
    *mode = previous;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
    struct si_stream *st = created(s);
    if (mode < SI_CAPTURE_GLOBAL || mode > SI_CAPTURE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (!st)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct si_capture *c = calloc(1, sizeof(*c));
    struct si_graph *g = calloc(1, sizeof(*g));
    if (!c || !g) {
        free(c);
        free(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&si_cu_mu);
    CUresult rc = st->capture ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        *c = (struct si_capture){mode, SI_CAPTURE_ACTIVE, pthread_self(), ++next_id, g, captures,
                                 0, 0};
        captures = c;
        st->capture = c;
    }
    pthread_mutex_unlock(&si_cu_mu);
    if (rc != CUDA_SUCCESS) {
        free(c);
        free(g);
    }
    return rc;
}

/* CUDA 13: capture into the program's graph `g`, redoing its nodes in order (see above). */
SI_EXPORT CUresult cuStreamBeginRecaptureToGraph(CUstream s, int mode, CUgraph g, void *callback,
                                                 void *user) {
    struct si_stream *st = created(s);
    (void)callback, (void)user;
    if (mode < SI_CAPTURE_GLOBAL || mode > SI_CAPTURE_RELAXED || !g)
        return CUDA_ERROR_INVALID_VALUE;
    if (!st)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct si_capture *c = calloc(1, sizeof(*c));
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&si_cu_mu);
    CUresult rc = st->capture ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        *c = (struct si_capture){mode, SI_CAPTURE_ACTIVE, pthread_self(), ++next_id, g, captures,
                                 1, 0};
        captures = c;
        st->capture = c;
    }
    pthread_mutex_unlock(&si_cu_mu);
    if (rc != CUDA_SUCCESS)
        free(c);
    return rc;
}

/* The pre-10.1 form, without a mode, kept as an exported symbol: the default (GLOBAL) mode. */
SI_EXPORT CUresult cuStreamBeginCapture(CUstream s) {
    return cuStreamBeginCapture_v2(s, SI_CAPTURE_GLOBAL);
}

static void unlink_capture(struct si_capture *c) {
    for (struct si_capture **p = &captures; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            return;
        }
}

SI_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *graph) {
    struct si_stream *st = created(s);
    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&si_cu_mu);
    struct si_capture *c = st ? st->capture : NULL;
    CUresult rc = c ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
    if (c && c->mode != SI_CAPTURE_RELAXED && !pthread_equal(c->thread, pthread_self()))
        rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (rc == CUDA_SUCCESS) {
        unlink_capture(c);
        st->capture = NULL;
    }
    pthread_mutex_unlock(&si_cu_mu);
    if (rc != CUDA_SUCCESS)
        return rc;
    int ok = c->status == SI_CAPTURE_ACTIVE;
    *graph = ok ? c->graph : NULL;
    if (!ok && !c->recapture) /* a failed recapture leaves the program's graph to destroy */
        free(c->graph);
    free(c);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
}

/* The per-thread default stream variant (CUDA Driver API reference, "Stream synchronization
 * behavior": with CUDA_API_PER_THREAD_DEFAULT_STREAM the API's entry points are its _ptsz
 * forms, which differ only in what the NULL stream names: the per-thread stream). */
SI_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *graph) {
    return cuStreamEndCapture(s ? s : SI_STREAM_PER_THREAD, graph);
}

static CUresult capture_status(CUstream s, int *status, unsigned long long *id, CUgraph *graph) {
    struct si_stream *st = created(s);
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&si_cu_mu);
    struct si_capture *c = st ? st->capture : NULL;
    *status = c ? c->status : SI_CAPTURE_NONE;
    if (c && id)
        *id = c->id;
    if (graph)
        *graph = c ? c->graph : NULL;
    pthread_mutex_unlock(&si_cu_mu);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuStreamIsCapturing(CUstream s, int *status) {
    return capture_status(s, status, NULL, NULL);
}

SI_EXPORT CUresult cuStreamGetCaptureInfo(CUstream s, int *status, unsigned long long *id) {
    return capture_status(s, status, id, NULL);
}

/* The 11.3 form adds the graph being captured and its dependency set (none modelled here). */
SI_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream s, int *status, unsigned long long *id,
                                             CUgraph *graph, const CUgraphNode **deps,
                                             size_t *ndeps) {
    if (deps)
        *deps = NULL;
    if (ndeps)
        *ndeps = 0;
    return capture_status(s, status, id, graph);
}
