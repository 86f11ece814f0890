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
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NOT_SUPPORTED = 801,
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
    uint64_t last;           /* ticket of its latest kernel (timeline.c), 0: none */
    unsigned head;
    uint64_t ring[SI_QUEUE]; /* tickets of the launches in flight */
};

struct si_ctx {
    int dev;
    int primary;
    int refs;
    int active;
    unsigned long long mem; /* the context's own device memory (an SI_CONTEXT allocation) */
    struct si_stream null_stream;
};

struct si_func {
    char name[64];
    uint64_t ns_per_block; /* 0: taken from the first kernel parameter (a u64) */
};

struct si_module {
    int nfuncs;
    int any; /* not a stand-in image: every name resolves, at SI_DEFAULT_COST */
    struct si_func funcs[32];
    struct si_func fallback[32];
    int nfallback;
};

struct si_pool {
    int dev;
};

struct si_array {
    unsigned long long mem;
};

struct si_event {
    int recorded;
    int dev;
    uint64_t t;      /* when it was recorded (CPU time) */
    uint64_t ticket; /* the kernel it waits for (its stream's latest), 0: none */
};

struct si_gnode {
    struct si_func *func;
    uint64_t blocks;
    uint64_t param_ns;
};

struct si_graph {
    int n;
    struct si_gnode node[64];
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
SI_HIDDEN struct si_stream *si_cu_stream(CUstream s);
SI_HIDDEN int si_cu_omitted(const char *name);

#endif
