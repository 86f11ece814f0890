/* cuprobe: a small CUDA driver API program for tests. It links against libcuda.so.1 by name
 * (whichever the loader finds: a stand-in, or the stand-in under an interposer) and runs the
 * steps given as arguments, printing one line per step:
 *
 *   dev:N            make device N's primary context current (default: device 0 at start)
 *   alloc:BYTES      cuMemAlloc_v2            -> "alloc BYTES RC"
 *   pitch:W:H        cuMemAllocPitch_v2       managed:B  cuMemAllocManaged
 *   async:B          cuMemAllocAsync          pool:B     cuMemPoolCreate + AllocFromPoolAsync
 *   vmm:B            cuMemCreate + reserve + map          array:W:H  cuArrayCreate_v2 (float)
 *   array3d:W:H:D    cuArray3DCreate_v2       mipmap:W:H:L cuMipmappedArrayCreate
 *   freeall          free everything allocated so far, each with its own free call
 *   info             cuMemGetInfo_v2          -> "info FREE TOTAL"
 *   spin:NS:BLOCKS:N N launches of the param-cost kernel, then synchronise
 *   ex:NS:BLOCKS:N / coop:NS:BLOCKS:N / graph:NS:BLOCKS:N   the same through the other paths
 *                                             -> "<kind> RC ELAPSED_NS"
 *   hold             print "holding" and sleep until killed
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUgraph, *CUgraphExec, *CUgraphNode;
typedef void *CUmemoryPool, *CUarray;

typedef struct {
    unsigned gx, gy, gz, bx, by, bz, shmem;
    CUstream stream;
    void *attrs;
    unsigned nattrs;
} LaunchConfig;
typedef struct {
    CUfunction func;
    unsigned gx, gy, gz, bx, by, bz, shmem;
    void **params, **extra;
    void *kern, *ctx; /* _v2 tail, unused */
} KernelNodeParams;
typedef struct {
    int type, handle_types, loc_type, loc_id;
    void *meta;
    unsigned char flags[8];
} AllocProp;
typedef struct {
    int alloc_type, handle_types, loc_type, loc_id;
    void *sec;
    size_t max;
    unsigned short usage;
    unsigned char reserved[54];
} PoolProps;
typedef struct {
    size_t w, h;
    int format;
    unsigned channels;
} ArrayDesc;
typedef struct {
    size_t w, h, d;
    int format;
    unsigned channels, flags;
} Array3DDesc;

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemPoolCreate(CUmemoryPool *, const PoolProps *);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemCreate(unsigned long long *, size_t, const AllocProp *, unsigned long long);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemRelease(unsigned long long);
CUresult cuArrayCreate_v2(CUarray *, const ArrayDesc *);
CUresult cuArray3DCreate_v2(CUarray *, const Array3DDesc *);
CUresult cuMipmappedArrayCreate(CUarray *, const Array3DDesc *, unsigned);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayDestroy(CUarray);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuLaunchKernelEx(const LaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void **);
CUresult cuCtxSynchronize(void);
CUresult cuGraphCreate(CUgraph *, unsigned);
CUresult cuGraphAddKernelNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                              const KernelNodeParams *);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphDestroy(CUgraph);

enum kind { PLAIN, ASYNC, VMM, ARRAY, MIPMAP };
static struct {
    enum kind kind;
    CUdeviceptr p;
    size_t size;
    CUarray a;
} held[4096];
static int nheld;
static CUfunction spin;

static void keep(enum kind k, CUdeviceptr p, size_t size, CUarray a) {
    if (nheld < 4096)
        held[nheld++] = (typeof(held[0])){k, p, size, a};
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static CUresult vmm(size_t b) {
    AllocProp prop = {.type = 1, .loc_type = 1, .loc_id = 0};
    unsigned long long h = 0;
    CUdeviceptr va = 0;
    CUresult rc = cuMemCreate(&h, b, &prop, 0);
    if (rc == 0 && (rc = cuMemAddressReserve(&va, b, 0, 0, 0)) == 0 &&
        (rc = cuMemMap(va, b, 0, h, 0)) == 0)
        keep(VMM, h, b, (CUarray)(uintptr_t)va);
    return rc;
}

static CUresult alloc_step(const char *op, unsigned long long a, unsigned long long b,
                           unsigned long long c) {
    CUdeviceptr p = 0;
    CUarray arr = NULL;
    CUresult rc = 1;
    size_t pitch;
    if (!strcmp(op, "alloc") && !(rc = cuMemAlloc_v2(&p, a)))
        keep(PLAIN, p, 0, NULL);
    else if (!strcmp(op, "pitch") && !(rc = cuMemAllocPitch_v2(&p, &pitch, a, b, 4)))
        keep(PLAIN, p, 0, NULL);
    else if (!strcmp(op, "managed") && !(rc = cuMemAllocManaged(&p, a, 1)))
        keep(PLAIN, p, 0, NULL);
    else if (!strcmp(op, "async") && !(rc = cuMemAllocAsync(&p, a, NULL)))
        keep(ASYNC, p, 0, NULL);
    else if (!strcmp(op, "pool")) {
        PoolProps props = {.alloc_type = 1, .loc_type = 1, .loc_id = 0};
        CUmemoryPool pool;
        if (!(rc = cuMemPoolCreate(&pool, &props)) &&
            !(rc = cuMemAllocFromPoolAsync(&p, a, pool, NULL)))
            keep(ASYNC, p, 0, NULL);
    } else if (!strcmp(op, "vmm"))
        rc = vmm(a);
    else if (!strcmp(op, "array")) {
        ArrayDesc d = {a, b, 0x20, 1};
        if (!(rc = cuArrayCreate_v2(&arr, &d)))
            keep(ARRAY, 0, 0, arr);
    } else if (!strcmp(op, "array3d")) {
        Array3DDesc d = {a, b, c, 0x20, 1, 0};
        if (!(rc = cuArray3DCreate_v2(&arr, &d)))
            keep(ARRAY, 0, 0, arr);
    } else if (!strcmp(op, "mipmap")) {
        Array3DDesc d = {a, b, 0, 0x20, 1, 0};
        if (!(rc = cuMipmappedArrayCreate(&arr, &d, (unsigned)c)))
            keep(MIPMAP, 0, 0, arr);
    }
    return rc;
}

static void free_all(void) {
    for (int i = 0; i < nheld; i++) {
        CUresult rc = 0;
        switch (held[i].kind) {
        case PLAIN: rc = cuMemFree_v2(held[i].p); break;
        case ASYNC: rc = cuMemFreeAsync(held[i].p, NULL); break;
        case VMM:
            cuMemUnmap((CUdeviceptr)(uintptr_t)held[i].a, held[i].size);
            rc = cuMemRelease(held[i].p);
            break;
        case ARRAY: rc = cuArrayDestroy(held[i].a); break;
        case MIPMAP: rc = cuMipmappedArrayDestroy(held[i].a); break;
        }
        if (rc)
            printf("free-failed %d\n", rc);
    }
    nheld = 0;
    cuCtxSynchronize(); /* pools release freed memory to the device at a synchronize */
}

static CUresult launch(const char *kind, unsigned long long ns, unsigned blocks) {
    void *params[] = {&ns};
    if (!strcmp(kind, "spin"))
        return cuLaunchKernel(spin, blocks, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    if (!strcmp(kind, "coop"))
        return cuLaunchCooperativeKernel(spin, blocks, 1, 1, 32, 1, 1, 0, NULL, params);
    if (!strcmp(kind, "ex")) {
        LaunchConfig cfg = {blocks, 1, 1, 32, 1, 1, 0, NULL, NULL, 0};
        return cuLaunchKernelEx(&cfg, spin, params, NULL);
    }
    CUgraph g;
    CUgraphExec exec;
    CUgraphNode node;
    KernelNodeParams p = {spin, blocks, 1, 1, 32, 1, 1, 0, params, NULL, NULL, NULL};
    CUresult rc = cuGraphCreate(&g, 0);
    if (!rc && !(rc = cuGraphAddKernelNode(&node, g, NULL, 0, &p)) &&
        !(rc = cuGraphInstantiateWithFlags(&exec, g, 0))) {
        rc = cuGraphLaunch(exec, NULL);
        cuGraphExecDestroy(exec);
    }
    cuGraphDestroy(g);
    return rc;
}

static int use_device(int dev) {
    CUcontext ctx;
    CUmodule mod;
    CUresult rc = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (!rc)
        rc = cuCtxSetCurrent(ctx);
    if (!rc)
        rc = cuModuleLoadData(&mod, "vgpu-standin-module\nfunc spin 0\n");
    if (!rc)
        rc = cuModuleGetFunction(&spin, mod, "spin");
    printf("dev %d %d\n", dev, rc);
    return rc;
}

static int step(const char *arg) {
    char op[16] = "";
    unsigned long long a = 0, b = 0, c = 0;
    sscanf(arg, "%15[a-z0-9]:%llu:%llu:%llu", op, &a, &b, &c);
    if (!strcmp(op, "dev"))
        return use_device((int)a);
    if (!strcmp(op, "freeall")) {
        free_all();
        printf("freeall\n");
    } else if (!strcmp(op, "info")) {
        size_t f = 0, t = 0;
        CUresult rc = cuMemGetInfo_v2(&f, &t);
        printf("info %zu %zu %d\n", f, t, rc);
    } else if (!strcmp(op, "hold")) {
        printf("holding\n");
        fflush(stdout);
        for (;;)
            pause();
    } else if (!strcmp(op, "spin") || !strcmp(op, "ex") || !strcmp(op, "coop") ||
               !strcmp(op, "graph")) {
        uint64_t t0 = now_ns();
        CUresult rc = 0;
        for (unsigned long long i = 0; i < c && !rc; i++)
            rc = launch(op, a, (unsigned)b);
        if (!rc)
            rc = cuCtxSynchronize();
        printf("%s %d %llu\n", op, rc, (unsigned long long)(now_ns() - t0));
    } else
        printf("%s %llu %d\n", op, a, alloc_step(op, a, b, c));
    return 0;
}

int main(int argc, char **argv) {
    CUresult rc = cuInit(0);
    printf("init %d\n", rc);
    if (rc || use_device(0))
        return 1;
    for (int i = 1; i < argc; i++) {
        step(argv[i]);
        fflush(stdout);
    }
    return 0;
}
