/* Stand-in libcuda.so.1: initialisation, devices and contexts.
 *
 * A context takes `context` bytes of device memory (config; 64 MiB by default), charged when it
 * is created (or a primary context first retained) and given back when it is destroyed (or its
 * last retain released), or when the process exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_local.h"

pthread_mutex_t si_cu_mu = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static __thread struct si_ctx *current;
static struct si_ctx *primary[SI_MAX_GPUS];
static struct si_ctx *live;   /* open contexts, under si_cu_mu */
static uint64_t epochs;       /* under si_cu_mu */

struct si_node *si_cu_node(CUresult *rc) {
    struct si_node *n = initialised ? si_node(NULL, 0) : NULL;
    *rc = n ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
    return n;
}

struct si_ctx *si_cu_current(void) { return current && current->active ? current : NULL; }

CUresult si_cu_take(struct si_ctx *ctx, int dev, uint64_t bytes, int kind,
                    unsigned long long *ptr) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    if (!ctx && dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (dev < 0)
        dev = ctx->dev;
    if (dev >= n->cfg.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    si_lock(n);
    uint64_t p = 0;
    int failed = si_mem_take(n, dev, bytes, kind, &p);
    si_unlock(n);
    *ptr = p;
    return failed ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult si_cu_give(uint64_t ptr, int kind) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    si_lock(n);
    int failed = si_mem_give(n, ptr, kind, NULL);
    si_unlock(n);
    return failed ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SI_EXPORT CUresult cuInit(unsigned flags) {
    char err[512];
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct si_node *n = si_node(err, sizeof(err));
    if (!n) {
        fprintf(stderr, "%s\n", err);
        return CUDA_ERROR_NO_DEVICE;
    }
    if (n->cfg.ngpus == 0)
        return CUDA_ERROR_NO_DEVICE;
    initialised = 1;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuDriverGetVersion(int *version) {
    char err[8];
    struct si_node *n = si_node(err, sizeof(err));
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = n ? n->cfg.cuda_version : 12040;
    return CUDA_SUCCESS;
}

static CUresult device(CUdevice d, const struct si_gpu_cfg **g) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!n)
        return rc;
    if (d < 0 || d >= n->cfg.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    *g = &n->cfg.gpu[d];
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuDeviceGetCount(int *count) {
    CUresult rc;
    struct si_node *n = si_cu_node(&rc);
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (n)
        *count = n->cfg.ngpus;
    return rc;
}

SI_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    const struct si_gpu_cfg *g;
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = device(ordinal, &g);
    if (rc == CUDA_SUCCESS)
        *d = ordinal;
    return rc;
}

SI_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    const struct si_gpu_cfg *g;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = device(d, &g);
    if (rc == CUDA_SUCCESS)
        snprintf(name, (size_t)len, "%s", g->name);
    return rc;
}

SI_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice d) {
    const struct si_gpu_cfg *g;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = device(d, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    const char *p = g->uuid + 4; /* "GPU-" then 32 hex digits and 4 dashes */
    for (int i = 0; i < 16; i++) {
        if (*p == '-')
            p++;
        unsigned v = 0;
        sscanf(p, "%2x", &v);
        uuid->bytes[i] = (unsigned char)v;
        p += 2;
    }
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice d) { return cuDeviceGetUuid(uuid, d); }

SI_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    const struct si_gpu_cfg *g;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = device(d, &g);
    if (rc == CUDA_SUCCESS)
        *bytes = g->memory;
    return rc;
}

/* The CUDA C++ Programming Guide's "Maximum number of resident threads per SM" by compute
 * capability: 1024 on 7.5, 1536 on 8.6, 8.9 and 12.x, 2048 on the others it lists. */
static int threads_per_sm(const struct si_gpu_cfg *g) {
    int cc = 10 * g->cc_major + g->cc_minor;
    if (cc == 75)
        return 1024;
    return cc == 86 || cc == 89 || g->cc_major == 12 ? 1536 : 2048;
}

static int attribute(const struct si_gpu_cfg *g, int attr, int *value) {
    unsigned dom = 0, bus = 0, dev = 0;
    sscanf(g->pci, "%x:%x:%x", &dom, &bus, &dev);
    switch (attr) {
    case 1: *value = 1024; return 0;         /* MAX_THREADS_PER_BLOCK */
    case 10: *value = 32; return 0;          /* WARP_SIZE */
    case 16: *value = g->sms; return 0;      /* MULTIPROCESSOR_COUNT */
    case 33: *value = (int)bus; return 0;    /* PCI_BUS_ID */
    case 39: *value = threads_per_sm(g); return 0; /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 34: *value = (int)dev; return 0;    /* PCI_DEVICE_ID */
    case 50: *value = (int)dom; return 0;    /* PCI_DOMAIN_ID */
    case 41: case 83: case 89: case 95: case 102: case 115:
        *value = 1; return 0; /* UNIFIED_ADDRESSING, MANAGED_MEMORY, CONCURRENT_MANAGED_ACCESS,
                                 COOPERATIVE_LAUNCH, VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                 MEMORY_POOLS_SUPPORTED */
    case 75: *value = g->cc_major; return 0; /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *value = g->cc_minor; return 0; /* COMPUTE_CAPABILITY_MINOR */
    default: *value = 0; return attr > 0 && attr < 200 ? 0 : -1;
    }
}

SI_EXPORT CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice d) {
    const struct si_gpu_cfg *g;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = device(d, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    return attribute(g, attr, value) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Contexts' lifetimes: objects created in a context (events) die with it. A context is live from
 * its creation (or its primary context's first retain) to its destruction (cuCtxDestroy, the
 * last cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset); each life has its own epoch, so an
 * object of an earlier life of the same primary context, or of a destroyed context whose memory
 * a new one reuses, is recognised as dead. */
int si_cu_ctx_live(const struct si_ctx *ctx, uint64_t epoch) {
    int found = 0;
    pthread_mutex_lock(&si_cu_mu);
    for (struct si_ctx *c = live; c && !found; c = c->next_live)
        found = c == ctx && c->epoch == epoch;
    pthread_mutex_unlock(&si_cu_mu);
    return found;
}

static void ctx_unlink(struct si_ctx *ctx) { /* under si_cu_mu */
    for (struct si_ctx **p = &live; *p; p = &(*p)->next_live)
        if (*p == ctx) {
            *p = ctx->next_live;
            return;
        }
}

static CUresult ctx_open(struct si_ctx *c) {
    CUresult rc = si_cu_take(NULL, c->dev, si_node(NULL, 0)->cfg.context_bytes, SI_CONTEXT,
                             &c->mem);
    if (rc == CUDA_SUCCESS) {
        c->active = 1;
        si_cu_limits_open(c);
        c->null_stream.ctx = c;
        c->epoch = ++epochs;
        c->next_live = live;
        live = c;
    }
    return rc;
}

/* Under si_cu_mu: the context's resources go (its memory, its allocations, the objects created in
 * it). */
static void ctx_close(struct si_ctx *c) {
    c->active = 0;
    ctx_unlink(c);
    si_cu_limits_close(c);
    si_cu_mem_close(c);
    si_cu_give(c->mem, SI_CONTEXT);
}

SI_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned flags, CUdevice d) {
    const struct si_gpu_cfg *g;
    (void)flags;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = device(d, &g);
    struct si_ctx *c = rc == CUDA_SUCCESS ? calloc(1, sizeof(*c)) : NULL;
    if (!c)
        return rc == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : rc;
    c->dev = d;
    pthread_mutex_lock(&si_cu_mu);
    rc = ctx_open(c);
    pthread_mutex_unlock(&si_cu_mu);
    if (rc != CUDA_SUCCESS) {
        free(c);
        return rc;
    }
    current = c;
    *pctx = c;
    return CUDA_SUCCESS;
}

/* cuCtxCreate (CUDA 3.1 and before, what cuGetProcAddress hands out below version 3020): the
 * same parameters and context as cuCtxCreate_v2. */
SI_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned flags, CUdevice d) {
    return cuCtxCreate_v2(pctx, flags, d);
}

/* CUDA Driver API reference, cuCtxCreate_v3 (CUDA 11.4): a context "with execution affinity",
 * paramsArray of numParams CUexecAffinityParam (its type, then a union whose SM-count member is
 * one unsigned int); CU_EXEC_AFFINITY_TYPE_SM_COUNT is "only supported Volta+ MPS". No MPS is
 * simulated, so a non-empty array answers CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY and an empty one
 * creates a regular context. */
typedef struct {
    int type;
    union {
        unsigned sm_count;
    } param;
} si_exec_affinity;

SI_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, si_exec_affinity *params, int nparams,
                                  unsigned flags, CUdevice d) {
    if (nparams < 0 || (nparams > 0 && !params) || (nparams == 0 && params))
        return CUDA_ERROR_INVALID_VALUE;
    if (nparams > 0)
        return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
    return cuCtxCreate_v2(pctx, flags, d);
}

/* cuCtxCreate_v4 (CUDA 12.5; cuCtxCreate itself since CUDA 13.0): CUctxCreateParams holds
 * execAffinityParams, numExecAffinityParams and cigParams, which "cannot be non-NULL at the same
 * time. If both are NULL, the context will be created as a regular CUDA context", as it is when
 * ctxCreateParams is NULL. CIG shares data with a D3D12/Vulkan client, which no stand-in node
 * has. */
typedef struct {
    si_exec_affinity *exec_affinity;
    int nexec_affinity;
    void *cig;
} si_ctx_create_params;

SI_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, const si_ctx_create_params *params,
                                  unsigned flags, CUdevice d) {
    if (!params)
        return cuCtxCreate_v2(pctx, flags, d);
    if (params->exec_affinity && params->cig)
        return CUDA_ERROR_INVALID_VALUE;
    if (params->cig)
        return CUDA_ERROR_NOT_SUPPORTED;
    return cuCtxCreate_v3(pctx, params->exec_affinity, params->nexec_affinity, flags, d);
}

SI_EXPORT CUresult cuCtxDestroy_v2(CUcontext c) {
    if (!c || c->primary || !c->active)
        return CUDA_ERROR_INVALID_CONTEXT;
    si_cu_wait(&c->null_stream);
    pthread_mutex_lock(&si_cu_mu);
    ctx_close(c);
    pthread_mutex_unlock(&si_cu_mu);
    if (current == c)
        current = NULL;
    free(c);
    return CUDA_SUCCESS;
}

/* ---- green contexts (CUDA 12.4) ----
 *
 * CUDA Driver API reference, Green Contexts: cuDeviceGetDevResource gives the device's SM
 * resource, cuDevResourceGenerateDesc a descriptor of resources, and cuGreenCtxCreate a green
 * context over it ("flags ... must be CU_GREEN_CTX_DEFAULT_STREAM"), which it does not make
 * current. cuCtxFromGreenCtx "converts a green context into the primary context" handle type so
 * that context APIs take it; here the two handles are one object, a context of its own.
 * cuGreenCtxStreamCreate makes a stream in it ("flags must be CU_STREAM_NON_BLOCKING"), and
 * cuGreenCtxDestroy destroys it with its resources (its streams' later calls fail). The SM split
 * itself is not simulated: a green context runs on its device's one timeline. */

#define SI_DEV_RESOURCE_TYPE_SM 1
#define SI_GREEN_CTX_DEFAULT_STREAM 0x1
#define SI_STREAM_NON_BLOCKING 0x1

typedef struct { /* CUdevResource: the type, internal padding, then the type's union */
    int type;
    unsigned char internal[92];
    union {
        unsigned sm_count; /* CUdevSmResource.smCount */
        unsigned char oversize[48];
    } u;
} si_dev_resource;

struct si_resource_desc {
    unsigned sm_count;
};

SI_EXPORT CUresult cuDeviceGetDevResource(CUdevice d, si_dev_resource *res, int type) {
    const struct si_gpu_cfg *g;
    CUresult rc = device(d, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!res || type != SI_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_VALUE;
    memset(res, 0, sizeof(*res));
    res->type = SI_DEV_RESOURCE_TYPE_SM;
    res->u.sm_count = (unsigned)g->sms;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuDevResourceGenerateDesc(struct si_resource_desc **desc,
                                             const si_dev_resource *res, unsigned n) {
    if (!desc || !res || n != 1 || res->type != SI_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_VALUE;
    *desc = calloc(1, sizeof(**desc)); /* lives as long as the process, as the driver's may */
    if (!*desc)
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*desc)->sm_count = res->u.sm_count;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGreenCtxCreate(CUcontext *green, struct si_resource_desc *desc, CUdevice d,
                                    unsigned flags) {
    struct si_ctx *was = current;
    if (!green || !desc || flags != SI_GREEN_CTX_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = cuCtxCreate_v2(green, 0, d);
    current = was; /* not made current */
    return rc;
}

SI_EXPORT CUresult cuCtxFromGreenCtx(CUcontext *pctx, CUcontext green) {
    if (!pctx || !green)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = green;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGreenCtxStreamCreate(CUstream *s, CUcontext green, unsigned flags,
                                          int priority) {
    (void)priority;
    if (!s || !green || !green->active || flags != SI_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_stream_new(s, green);
}

SI_EXPORT CUresult cuGreenCtxDestroy(CUcontext green) { return cuCtxDestroy_v2(green); }

SI_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice d) {
    const struct si_gpu_cfg *g;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = device(d, &g);
    pthread_mutex_lock(&si_cu_mu);
    if (rc == CUDA_SUCCESS && !primary[d] && !(primary[d] = calloc(1, sizeof(struct si_ctx))))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && !primary[d]->active) {
        primary[d]->dev = d;
        primary[d]->primary = 1;
        rc = ctx_open(primary[d]);
    }
    if (rc == CUDA_SUCCESS) {
        primary[d]->refs++;
        *pctx = primary[d];
    }
    pthread_mutex_unlock(&si_cu_mu);
    return rc;
}

SI_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    const struct si_gpu_cfg *g;
    CUresult rc = device(d, &g);
    pthread_mutex_lock(&si_cu_mu);
    struct si_ctx *c = rc == CUDA_SUCCESS ? primary[d] : NULL;
    if (rc == CUDA_SUCCESS && (!c || !c->active))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS && --c->refs == 0 && c->active)
        ctx_close(c);
    pthread_mutex_unlock(&si_cu_mu);
    return rc;
}

/* "Destroy all allocations and reset all state on the primary context ... Resetting the primary
 * context does not release it" (cuDevicePrimaryCtxReset_v2): its objects die, its retain count
 * stays, and the next cuDevicePrimaryCtxRetain opens it again (a new life, the same handle). */
SI_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) {
    const struct si_gpu_cfg *g;
    CUresult rc = device(d, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&si_cu_mu);
    struct si_ctx *c = primary[d];
    int live = c && c->active;
    pthread_mutex_unlock(&si_cu_mu);
    if (live)
        si_cu_wait(&c->null_stream);
    pthread_mutex_lock(&si_cu_mu);
    if (c && c->active)
        ctx_close(c);
    pthread_mutex_unlock(&si_cu_mu);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice d) { return cuDevicePrimaryCtxReset_v2(d); }

SI_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active) {
    const struct si_gpu_cfg *g;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = device(d, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&si_cu_mu);
    *flags = 0;
    *active = primary[d] && primary[d]->active;
    pthread_mutex_unlock(&si_cu_mu);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return cuDevicePrimaryCtxRelease_v2(d); }

SI_EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
    if (c && !c->active)
        return CUDA_ERROR_INVALID_CONTEXT;
    current = c;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = si_cu_current();
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
    struct si_ctx *c = si_cu_current();
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    *d = c->dev;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuCtxSynchronize(void) {
    struct si_ctx *c = si_cu_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = si_cu_unsafe(); /* a potentially unsafe call during capture (cuda_capture.c) */
    if (rc != CUDA_SUCCESS)
        return rc;
    si_cu_wait(&c->null_stream); /* every stream of c advances it (see exec.c) */
    si_cu_pools_synchronized();
    return CUDA_SUCCESS;
}
