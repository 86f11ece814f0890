/* Stand-in libcuda.so.1: modules, launches, streams, events and graphs.
 *
 * A kernel takes simulated time: blocks (gridX * gridY * gridZ) times its function's cost. A
 * module image in the stand-in's own text format sets each function's cost:
 *
 *   vgpu-standin-module
 *   func spin 0        # 0: ns per block from the first kernel parameter (a uint64)
 *   func fixed 1000    # 1000 ns per block
 *
 * Any other image (PTX, cubin) loads too, and all its functions cost SI_DEFAULT_COST per block.
 * Each GPU is one timeline shared by all processes, time-sliced between them (timeline.c).
 * Launches return at once (a stream holds up to SI_QUEUE launches in flight, then a launch
 * waits); synchronising sleeps until the stream's last kernel ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_local.h"

#define SI_DEFAULT_COST 1000ull
#define SI_MAGIC_TEXT "vgpu-standin-module"

static struct si_stream *stream_of(CUstream s) {
    struct si_ctx *c = si_cu_current();
    /* NULL, CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2) name the context's own. */
    if (s == SI_STREAM_PER_THREAD && si_cu_ptds())
        return si_cu_ptds(); /* capturing (cuda_capture.c) */
    if ((uintptr_t)s <= 2)
        return c ? &c->null_stream : NULL;
    return s;
}

struct si_stream *si_cu_stream(CUstream s) { return stream_of(s); }

static struct si_node *node(void) {
    CUresult rc;
    return si_cu_node(&rc);
}

void si_cu_wait(struct si_stream *st) {
    pthread_mutex_lock(&si_cu_mu);
    uint64_t last = st->last;
    pthread_mutex_unlock(&si_cu_mu);
    struct si_node *n = node();
    if (n)
        si_timeline_wait(n, st->ctx->dev, last);
}

CUresult si_cu_launch(struct si_func *f, uint64_t blocks, uint64_t param_ns, CUstream s) {
    if (!f || blocks == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_submit(blocks * (f->ns_per_block ? f->ns_per_block : param_ns), s);
}

/* Work of `ns` on a stream: appended to its capture, or run on the device's timeline. */
CUresult si_cu_submit(uint64_t ns, CUstream s) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    struct si_stream *st = stream_of(s);
    if (!n)
        return rc;
    if (!st || !st->ctx->active)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&si_cu_mu);
    int captured = si_cu_capture_append(st, ns, &rc);
    uint64_t oldest = st->ring[st->head % SI_QUEUE];
    pthread_mutex_unlock(&si_cu_mu);
    if (captured)
        return rc;
    si_lock(n);
    si_register(n);
    uint64_t ticket;
    while (!(ticket = si_timeline_run(n, st->ctx->dev, ns, oldest))) {
        si_unlock(n); /* the queue is full: wait for its oldest launch */
        si_timeline_wait(n, st->ctx->dev, oldest);
        si_lock(n);
    }
    si_unlock(n);
    pthread_mutex_lock(&si_cu_mu);
    st->ring[st->head++ % SI_QUEUE] = ticket;
    st->last = ticket; /* a process's kernels end in the order they were queued */
    st->ctx->null_stream.last = ticket; /* context-wide: cuCtxSynchronize */
    pthread_mutex_unlock(&si_cu_mu);
    return CUDA_SUCCESS;
}

static uint64_t param_ns(struct si_func *f, void **params) {
    if (!f || f->ns_per_block || !params || !params[0])
        return 0;
    uint64_t v;
    memcpy(&v, params[0], sizeof(v));
    return v;
}

static uint64_t blocks(unsigned x, unsigned y, unsigned z) { return (uint64_t)x * y * z; }

static int needs_param(struct si_func *f, void **params) {
    return f && !f->ns_per_block && (!params || !params[0]);
}

SI_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                  unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                  CUstream s, void **params, void **extra) {
    (void)bx, (void)by, (void)bz, (void)shmem, (void)extra;
    if (needs_param(f, params))
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_launch(f, blocks(gx, gy, gz), param_ns(f, params), s);
}

SI_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params,
                                    void **extra) {
    (void)extra;
    if (!cfg || needs_param(f, params))
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_launch(f, blocks(cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ),
                        param_ns(f, params), cfg->hStream);
}

SI_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                             unsigned bx, unsigned by, unsigned bz,
                                             unsigned shmem, CUstream s, void **params) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

/* ---- modules ---- */

static int parse_module(struct si_module *m, const char *text) {
    const char *line = strchr(text, '\n');
    while (line && *line) {
        char name[64];
        unsigned long long cost;
        line++;
        if (sscanf(line, "func %63s %llu", name, &cost) == 2) {
            if (m->nfuncs == 32)
                return -1;
            snprintf(m->funcs[m->nfuncs].name, sizeof(name), "%s", name);
            m->funcs[m->nfuncs++].ns_per_block = cost;
        }
        line = strchr(line, '\n');
    }
    return 0;
}

/* An image's functions (a stand-in image's costs, or any name for another image).
 *
 * Knob: VGPU_STANDIN_FAIL_PTX=1 in the environment makes loading any image that is not a
 * stand-in image (PTX, for the stand-in) answer CUDA_ERROR_INVALID_PTX, which cuModuleLoadData,
 * cuModuleLoadDataEx and cuLibraryLoadData document for "a PTX compilation failed": a driver
 * whose JIT rejects hack/gpu-check.sh's hand-written kernels, for callers that must cope. */
static CUresult load_image(struct si_module **out, const void *image) {
    const char *fail = getenv("VGPU_STANDIN_FAIL_PTX");
    int ptx = strncmp(image, SI_MAGIC_TEXT, strlen(SI_MAGIC_TEXT)) != 0;
    if (ptx && fail && strcmp(fail, "1") == 0)
        return CUDA_ERROR_INVALID_PTX;
    struct si_module *m = calloc(1, sizeof(*m));
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (ptx)
        m->any = 1;
    else if (parse_module(m, image) != 0) {
        free(m);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    *out = m;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuModuleLoadData(CUmodule *mod, const void *image) {
    if (!mod || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if (!si_cu_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    struct si_module *m = NULL;
    CUresult rc = load_image(&m, image);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&si_cu_mu);
    si_cu_current()->loaded = 1; /* its heap and printf FIFO sizes are now fixed (cuda_limit.c) */
    pthread_mutex_unlock(&si_cu_mu);
    *mod = m;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    if (!f || !m || !name)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i].name, name) == 0) {
            *f = &m->funcs[i];
            return CUDA_SUCCESS;
        }
    if (!m->any || m->nfuncs == 32)
        return CUDA_ERROR_NOT_FOUND;
    struct si_func *nf = &m->funcs[m->nfuncs++];
    snprintf(nf->name, sizeof(nf->name), "%s", name);
    nf->ns_per_block = SI_DEFAULT_COST;
    *f = nf;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuModuleUnload(CUmodule m) {
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    free(m);
    return CUDA_SUCCESS;
}

/* ---- libraries (context-independent loading, CUDA 12.0) ----
 *
 * CUDA Driver API reference, Library Management: cuLibraryLoadData loads an image without a
 * context, and cuLibraryGetKernel returns a CUkernel, which cuLaunchKernel takes cast to
 * CUfunction: "the context to launch the kernel on will either be taken from the specified
 * stream hStream or the current context in case of NULL stream" (cuLaunchKernel, and likewise
 * cuLaunchKernelEx and cuLaunchCooperativeKernel). Launches here already run on their stream's
 * context (stream_of), so a library is a module that needs no current context, and a kernel is
 * one of its functions. JIT and library options are accepted and ignored. */

SI_EXPORT CUresult cuLibraryLoadData(CUmodule *lib, const void *image, void *jit_options,
                                     void **jit_values, unsigned njit, void *lib_options,
                                     void **lib_values, unsigned nlib) {
    (void)jit_options, (void)jit_values, (void)njit, (void)lib_options, (void)lib_values,
        (void)nlib;
    if (!lib || !image)
        return CUDA_ERROR_INVALID_VALUE;
    return load_image(lib, image);
}

SI_EXPORT CUresult cuLibraryGetKernel(CUfunction *kernel, CUmodule lib, const char *name) {
    return cuModuleGetFunction(kernel, lib, name);
}

SI_EXPORT CUresult cuLibraryUnload(CUmodule lib) { return cuModuleUnload(lib); }

/* ---- streams ---- */

CUresult si_cu_stream_new(CUstream *s, struct si_ctx *c) {
    struct si_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->ctx = c;
    *s = st;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    struct si_ctx *c = si_cu_current();
    (void)flags;
    if (!s)
        return CUDA_ERROR_INVALID_VALUE;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    return si_cu_stream_new(s, c);
}

/* Synchronising a stream that is being captured is invalid (Programming Guide, "Prohibited and
 * Unhandled Operations") and invalidates its capture; otherwise it is a potentially unsafe call. */
SI_EXPORT CUresult cuStreamSynchronize(CUstream s) {
    struct si_stream *st = stream_of(s);
    if (!st)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&si_cu_mu);
    unsigned long long capture = si_cu_capture_id(st);
    si_cu_capture_invalidate(capture);
    pthread_mutex_unlock(&si_cu_mu);
    CUresult rc = capture ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : si_cu_unsafe();
    if (rc != CUDA_SUCCESS)
        return rc;
    si_cu_wait(st);
    si_cu_pools_synchronized();
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
    if ((uintptr_t)s <= 2)
        return CUDA_ERROR_INVALID_HANDLE;
    free(s); /* like the driver: pending work still completes on the device timeline */
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuStreamDestroy(CUstream s) { return cuStreamDestroy_v2(s); }

/* ---- events ----
 *
 * An event belongs to the context current when it was created (cuEventCreate: "Creates an event
 * *phEvent for the current context"); destroying or resetting that context destroys it with the
 * context's other resources (cuCtxDestroy, cuDevicePrimaryCtxReset: "destroys and cleans up all
 * resources"), after which its handle answers CUDA_ERROR_INVALID_HANDLE.
 *
 * Knob: VGPU_STANDIN_FAIL_EVENTS=1 in the environment makes cuEventCreate answer
 * CUDA_ERROR_OUT_OF_MEMORY (one of its documented errors), to test callers that must cope. */

SI_EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
    struct si_ctx *c = si_cu_current();
    const char *fail = getenv("VGPU_STANDIN_FAIL_EVENTS");
    (void)flags;
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (fail && strcmp(fail, "1") == 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *e = calloc(1, sizeof(struct si_event));
    if (!*e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*e)->ctx = c;
    (*e)->epoch = c->epoch;
    return CUDA_SUCCESS;
}

static int event_live(CUevent e) { return e && si_cu_ctx_live(e->ctx, e->epoch); }

/* Recording into a capturing stream captures the record: the event is then a captured event. */
SI_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
    struct si_stream *st = stream_of(s);
    if (!event_live(e))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!st)
        return CUDA_ERROR_INVALID_CONTEXT;
    /* CUDA Programming Guide, "Stream and Event Behavior": recording an event "will fail if the
     * input event and input stream are associated to different devices". */
    if (e->ctx->dev != st->ctx->dev)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&si_cu_mu);
    e->capture = si_cu_capture_id(st);
    if (!e->capture) {
        e->t = si_now_ns();
        e->dev = st->ctx->dev;
        e->ticket = st->last;
        e->recorded = 1;
    }
    pthread_mutex_unlock(&si_cu_mu);
    return CUDA_SUCCESS;
}

/* What querying or synchronising `e` answers before it looks at the event's time. */
static CUresult status_check(CUevent e) {
    if (!event_live(e))
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->capture) {
        pthread_mutex_lock(&si_cu_mu);
        si_cu_capture_invalidate(e->capture);
        pthread_mutex_unlock(&si_cu_mu);
        return CUDA_ERROR_CAPTURED_EVENT;
    }
    return si_cu_unsafe();
}

/* An event completes when the work before it in its stream has: its time is then the later of
 * its recording and that kernel's end on the timeline. 1 if complete, with the time. */
static int event_time(CUevent e, uint64_t *t) {
    uint64_t end = 0;
    struct si_node *n = node();
    if (!e->recorded || !n) {
        *t = e->t;
        return 1;
    }
    int done = si_timeline_end(n, e->dev, e->ticket, &end);
    *t = end > e->t ? end : e->t;
    return done;
}

SI_EXPORT CUresult cuEventQuery(CUevent e) {
    CUresult rc = status_check(e);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t t;
    return event_time(e, &t) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SI_EXPORT CUresult cuEventSynchronize(CUevent e) {
    CUresult rc = status_check(e);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct si_node *n = node();
    if (e->recorded && n)
        si_timeline_wait(n, e->dev, e->ticket);
    si_cu_pools_synchronized();
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    if (!ms || !start || !end)
        return CUDA_ERROR_INVALID_VALUE;
    if (!event_live(start) || !event_live(end) || !start->recorded || !end->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t t0, t1;
    if (!event_time(start, &t0) || !event_time(end, &t1))
        return CUDA_ERROR_NOT_READY;
    *ms = (float)((double)((int64_t)(t1 - t0)) / 1e6);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    int live = event_live(e);
    free(e); /* the stand-in's own memory either way; a dead context's handle is invalid */
    return live ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SI_EXPORT CUresult cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }
