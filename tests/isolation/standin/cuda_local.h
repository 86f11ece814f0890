/* CUDA driver API types, declared here from NVIDIA's public CUDA Driver API reference (no
 * NVIDIA header is used), and the stand-in's per-process driver state. */
#ifndef VGPU_STANDIN_CUDA_LOCAL_H
#define VGPU_STANDIN_CUDA_LOCAL_H

#include "standin.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef struct si_ctx *CUcontext;
typedef struct si_stream *CUstream;
typedef struct si_module *CUmodule;
typedef struct si_func *CUfunction;
typedef struct si_event *CUevent;
typedef struct si_graph *CUgraph;
typedef struct si_graph *CUgraphExec;
typedef void *CUgraphNode;
typedef struct si_pool *CUmemoryPool;
typedef struct si_array *CUarray;
typedef struct si_array *CUmipmappedArray;
typedef struct { unsigned char bytes[16]; } CUuuid;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_UNSUPPORTED_LIMIT = 215,
    CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY = 224,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_CAPTURED_EVENT = 907,
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
    CUDA_ERROR_UNKNOWN = 999,
};

typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    void *attrs;
    unsigned numAttrs;
} CUlaunchConfig;

typedef struct { /* the leading fields of CUDA_KERNEL_NODE_PARAMS (and _v2) */
    CUfunction func;
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams;
    void **extra;
} CUDA_KERNEL_NODE_PARAMS;

typedef struct {
    int type;
    int id;
} CUmemLocation;
/* The device whose memory a location names, or -1: CU_MEM_LOCATION_TYPE_DEVICE (1), `id` the
 * ordinal; CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN (6, CUDA 13.4), "a portion of device
 * memory, specified by the locality domain ID": `id` is then CUmemLocation's `localized`
 * member, the device ordinal in its first byte and the domain in its second. */
static inline int si_location_dev(CUmemLocation loc) {
    unsigned char localized[sizeof loc.id];
    __builtin_memcpy(localized, &loc.id, sizeof localized);
    return loc.type == 1 ? loc.id : loc.type == 6 ? localized[0] : -1;
}

typedef struct { /* CUmemAllocationProp: type, requestedHandleTypes, location, ... */
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;

typedef struct { /* CUmemPoolProps: allocType, handleTypes, location, ... */
    int allocType;
    int handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

typedef struct {
    size_t Width, Height;
    int Format;
    unsigned NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct {
    size_t Width, Height, Depth;
    int Format;
    unsigned NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* ---- per-process state ---- */
#define SI_QUEUE 1024 /* launches a stream may have in flight before a launch blocks */

struct si_stream {
    struct si_ctx *ctx;
    struct si_capture *capture; /* the capture sequence this stream is in, or NULL */
    uint64_t last;              /* ticket of its latest kernel (timeline.c), 0: none */
    unsigned head;
    uint64_t ring[SI_QUEUE]; /* tickets of the launches in flight */
};

#define SI_LIMITS 3 /* the CUlimit values simulated: stack, printf FIFO, malloc heap */

struct si_ctx {
    int dev;
    int primary;
    int refs;
    int active;
    unsigned long long mem; /* the context's own device memory (an SI_CONTEXT allocation) */
    size_t limit[SI_LIMITS]; /* cuCtxSetLimit's stack, printf FIFO and heap sizes (cuda_limit.c) */
    unsigned long long limit_mem[SI_LIMITS]; /* what each takes beyond its default, or 0 */
    int loaded;                              /* a module was loaded into it */
    struct si_stream null_stream;
    uint64_t epoch;            /* changes when the context is destroyed or reset */
    struct si_ctx *next_live;  /* the process's live contexts */
};

struct si_func {
    char name[64];
    uint64_t ns_per_block; /* 0: taken from the first kernel parameter (a u64) */
    uint64_t legacy_param_ns; /* cuParamSetv at offset 0, for cuLaunch/cuLaunchGrid */
};

struct si_module {
    int nfuncs;
    int any; /* not a stand-in image: every name resolves, at SI_DEFAULT_COST */
    struct si_func funcs[32];
    struct si_func fallback[32];
    int nfallback;
};

struct si_array {
    unsigned long long mem;
};

struct si_event {
    int recorded;
    unsigned long long capture; /* nonzero: last recorded in the capture with this id */
    int dev;
    uint64_t t;         /* when it was recorded (CPU time) */
    uint64_t ticket;    /* the kernel it waits for (its stream's latest), 0: none */
    struct si_ctx *ctx; /* the context it was created in, and that context's epoch then */
    uint64_t epoch;
};

struct si_gnode {
    uint64_t ns; /* simulated time the node's work takes */
    int mem; /* 0: a kernel node; SI_GRAPH_ALLOC or SI_GRAPH_FREE: a memory node of `dptr` */
    int child; /* the first node of a child graph node: how many nodes it holds (else 0) */
    CUdeviceptr dptr;
};
enum { SI_GRAPH_ALLOC = 1, SI_GRAPH_FREE = 2 };

struct si_graph {
    int n;
    struct si_gnode node[64];
    struct si_graph *owner;      /* the parent a child graph was moved into (cuGraphAddNode) */
    struct si_graph *owned;      /* the child graphs moved into this one */
    struct si_graph *next_owned; /* the next child moved into the same parent */
    struct si_graph *source;     /* an executable graph's: the graph it was instantiated from,
                                  * whose node handles name its nodes (never dereferenced) */
};

SI_HIDDEN extern pthread_mutex_t si_cu_mu; /* guards the process-local state */
SI_HIDDEN struct si_node *si_cu_node(CUresult *rc);
SI_HIDDEN void si_cu_wait(struct si_stream *st); /* until the stream's latest kernel is done */
SI_HIDDEN struct si_ctx *si_cu_current(void);
SI_HIDDEN CUresult si_cu_take(struct si_ctx *ctx, int dev, uint64_t bytes, int kind,
                              unsigned long long *ptr);
SI_HIDDEN CUresult si_cu_give(uint64_t ptr, int kind);
SI_HIDDEN CUresult si_cu_launch(struct si_func *f, uint64_t blocks, uint64_t param_ns,
                                CUstream s);
SI_HIDDEN CUresult si_cu_submit(uint64_t ns, CUstream s);
SI_HIDDEN struct si_stream *si_cu_stream(CUstream s);
#define SI_STREAM_PER_THREAD ((CUstream)0x2) /* CU_STREAM_PER_THREAD */
/* cuda_capture.c: this thread's per-thread default stream while it captures, else NULL. */
SI_HIDDEN struct si_stream *si_cu_ptds(void);
/* A new stream of context `c` (cuStreamCreate, cuGreenCtxStreamCreate). */
SI_HIDDEN CUresult si_cu_stream_new(CUstream *s, struct si_ctx *c);
SI_HIDDEN int si_cu_omitted(const char *name);
/* cuda_pool.c: pools release what exceeds their release threshold at every synchronize call. */
SI_HIDDEN void si_cu_pools_synchronized(void);
/* cuda_pool.c: frees a pool or graph allocation (1), or 0 when `dptr` is neither. */
SI_HIDDEN int si_cu_pool_free(CUdeviceptr dptr);
/* cuda_graph.c: frees a graph allocation (1), or 0 when `dptr` is not one. */
SI_HIDDEN int si_cu_graph_free(CUdeviceptr dptr);
/* cuda_graph.c: adds a memory allocation node of `bytes` on `dev` to `g` (its address in *dptr),
 * or a free node of the graph allocation `dptr`. */
SI_HIDDEN CUresult si_cu_graph_alloc(CUgraphNode *node, struct si_graph *g, int dev,
                                     uint64_t bytes, CUdeviceptr *dptr);
SI_HIDDEN CUresult si_cu_graph_free_node(CUgraphNode *node, struct si_graph *g, CUdeviceptr dptr);
/* cuda_graph.c: 1 when `n` is an allocation node of `bytes` on `dev`. */
SI_HIDDEN int si_cu_graph_alloc_is(const struct si_gnode *n, int dev, uint64_t bytes);
/* cuda_capture.c: a stream-ordered allocation (dev, bytes; *dptr) or free (bytes 0, dptr) on a
 * capturing stream becomes a memory node of the capture's graph: 0 when `st` is not capturing,
 * else 1 and *rc is the call's answer. */
SI_HIDDEN int si_cu_capture_mem(struct si_stream *st, int dev, uint64_t bytes, CUdeviceptr *dptr,
                                CUresult *rc);

/* ---- stream capture (cuda_capture.c) and context lifetimes (cuda_core.c) ---- */
enum { SI_CAPTURE_GLOBAL = 0, SI_CAPTURE_THREAD_LOCAL = 1, SI_CAPTURE_RELAXED = 2 };
enum { SI_CAPTURE_NONE = 0, SI_CAPTURE_ACTIVE = 1, SI_CAPTURE_INVALIDATED = 2 };

struct si_capture {
    int mode;   /* the mode cuStreamBeginCapture_v2 was given */
    int status; /* SI_CAPTURE_ACTIVE or SI_CAPTURE_INVALIDATED */
    pthread_t thread;
    unsigned long long id;
    struct si_graph *graph;
    struct si_capture *next;
    int recapture; /* cuStreamBeginRecaptureToGraph: `graph` is the program's, its nodes redone */
    int pos;       /* while recapturing: the next node to be recaptured */
};

/* Under si_cu_mu: appends `ns` of work to the stream's capture. 0: not capturing; else 1 and
 * *rc is the launch's answer. */
SI_HIDDEN int si_cu_capture_append(struct si_stream *st, uint64_t ns, CUresult *rc);
/* A potentially unsafe call (cuThreadExchangeStreamCaptureMode's term): CUDA_SUCCESS, or
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED after invalidating the captures that prohibit it. */
SI_HIDDEN CUresult si_cu_unsafe(void);
/* Under si_cu_mu: the id of the stream's capture (0: none), and invalidating one by id. */
SI_HIDDEN unsigned long long si_cu_capture_id(const struct si_stream *st);
SI_HIDDEN void si_cu_capture_invalidate(unsigned long long id);
/* cuda_limit.c: a context's limits at their defaults when it opens; under si_cu_mu, what they
 * took given back when it closes. */
SI_HIDDEN void si_cu_limits_open(struct si_ctx *c);
SI_HIDDEN void si_cu_limits_close(struct si_ctx *c);
/* 1 while `ctx` is alive in the epoch an object was created in. */
SI_HIDDEN int si_cu_ctx_live(const struct si_ctx *ctx, uint64_t epoch);
/* cuda_mem.c: frees an allocation of a context (cuMemFree, cuMemFreeAsync, cuArrayDestroy);
 * under si_cu_mu, frees what a closing context still holds. */
SI_HIDDEN CUresult si_cu_mem_free(unsigned long long ptr);
SI_HIDDEN void si_cu_mem_close(struct si_ctx *c);

#endif
