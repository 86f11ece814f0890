/* A driver-API program for the isolation tests: allocates through every path, reports what memory
 * queries answer, and keeps a GPU busy with "spin" kernels (the stand-in's module format: a kernel
 * that takes its first parameter in nanoseconds per block). Prototypes in cudrv.h (from NVIDIA's
 * public Driver API reference); linked against libcuda.so.1 by name.
 *
 *   cuload info                                   per device: uuid, totals, free
 *   cuload alloc DEV PATH BYTES COUNT [hold]      PATH: mem pitch managed async pool vmm vmmhost
 *                                                 array array3d mipmap; prints each result code
 *   cuload spin DEV SECONDS KERNEL_US MODE        MODE: kernel ex coop graph streams (round robin
 *                                                 over four streams) streams8 (over eight);
 *                                                 prints pid, window_ns
 *   cuload threads DEV THREADS ROUNDS BYTES       allocate, launch, free from many threads
 *   cuload bench DEV COUNT                        ns per launch (NULL stream, then a stream of
 *                                                 its own), per allocate/free pair and per
 *                                                 cuMemAllocAsync/cuMemFreeAsync pair */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudrv.h"

typedef struct { size_t w, h; int format; unsigned channels; } ArrayDesc;
typedef struct { size_t w, h, d; int format; unsigned channels, flags; } Array3DDesc;
typedef struct {
    unsigned gx, gy, gz, bx, by, bz, shared;
    CUstream stream;
    void *attrs;
    unsigned nattrs;
} LaunchConfig;
typedef struct {
    CUfunction func;
    unsigned gx, gy, gz, bx, by, bz, shared;
    void **params, **extra;
} KernelNodeParams;
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuArrayCreate_v2(CUarray *, const ArrayDesc *);
CUresult cuArray3DCreate_v2(CUarray *, const Array3DDesc *);
CUresult cuMipmappedArrayCreate(CUarray *, const Array3DDesc *, unsigned);
CUresult cuLaunchKernelEx(const LaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void **);
CUresult cuGraphAddKernelNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                              const KernelNodeParams *);

static int info(void)
{
    int n = 0;
    check(cuDeviceGetCount(&n), "cuDeviceGetCount");
    for (int i = 0; i < n; i++) {
        unsigned char u[16];
        size_t total = 0, free_b = 0, info_total = 0;
        check(cuDeviceGetUuid(u, i), "cuDeviceGetUuid");
        printf("device %d GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
               i, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
               u[13], u[14], u[15]);
        CUresult rc = cuDeviceTotalMem_v2(&total, i);
        printf(" total_rc %d total %zu", rc, total);
        CUdevice dev;
        CUcontext ctx;
        rc = cuDeviceGet(&dev, i);
        if (rc == 0)
            rc = cuDevicePrimaryCtxRetain(&ctx, dev);
        if (rc == 0)
            rc = cuCtxSetCurrent(ctx);
        if (rc == 0)
            rc = cuMemGetInfo_v2(&free_b, &info_total);
        printf(" info_rc %d info_total %zu info_free %zu\n", rc, info_total, free_b);
    }
    return 0;
}

static CUresult alloc_one(const char *path, size_t bytes, int ordinal)
{
    CUdeviceptr p;
    size_t pitch;
    CUarray a;
    unsigned long long h;
    if (!strcmp(path, "mem"))
        return cuMemAlloc_v2(&p, bytes);
    if (!strcmp(path, "pitch"))
        return cuMemAllocPitch_v2(&p, &pitch, bytes / 256, 256, 4);
    if (!strcmp(path, "managed"))
        return cuMemAllocManaged(&p, bytes, 1);
    if (!strcmp(path, "async"))
        return cuMemAllocAsync(&p, bytes, NULL);
    if (!strcmp(path, "pool")) {
        static CUmemoryPool pool;
        PoolProps props;
        memset(&props, 0, sizeof props);
        props.alloc_type = PINNED;
        props.location = (Location){ON_DEVICE, ordinal};
        if (!pool)
            check(cuMemPoolCreate(&pool, &props), "cuMemPoolCreate");
        return cuMemAllocFromPoolAsync(&p, bytes, pool, NULL);
    }
    if (!strcmp(path, "vmm") || !strcmp(path, "vmmhost")) {
        AllocProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = 1;
        prop.location.type = strcmp(path, "vmm") ? 2 : 1; /* 2: host */
        prop.location.id = ordinal;
        return cuMemCreate(&h, bytes, &prop, 0);
    }
    if (!strcmp(path, "array")) { /* float, one channel: 4 bytes per element */
        ArrayDesc d = {bytes / 4 / 256, 256, 0x20, 1};
        return cuArrayCreate_v2(&a, &d);
    }
    if (!strcmp(path, "array3d")) {
        Array3DDesc d = {bytes / 4 / 256 / 4, 256, 4, 0x20, 1, 0};
        return cuArray3DCreate_v2(&a, &d);
    }
    if (!strcmp(path, "mipmap")) { /* one level: exactly the base size */
        Array3DDesc d = {bytes / 4 / 256, 256, 0, 0x20, 1, 0};
        return cuMipmappedArrayCreate(&a, &d, 1);
    }
    fprintf(stderr, "cuload: unknown allocation path %s\n", path);
    exit(2);
}

static int alloc(int ordinal, const char *path, size_t bytes, int count, int hold)
{
    use_device(ordinal);
    for (int i = 0; i < count; i++)
        printf("rc %d\n", alloc_one(path, bytes, ordinal));
    printf("done\n");
    fflush(stdout);
    while (hold)
        pause();
    return 0;
}

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

static CUfunction spin_function(void)
{
    static const char image[] = "vgpu-standin-module\nfunc spin 0\n";
    CUmodule mod;
    CUfunction f;
    check(cuModuleLoadData(&mod, image), "cuModuleLoadData");
    check(cuModuleGetFunction(&f, mod, "spin"), "cuModuleGetFunction");
    return f;
}

static int spin(int ordinal, double seconds, uint64_t kernel_us, const char *mode)
{
    use_device(ordinal);
    CUfunction f = spin_function();
    uint64_t ns = kernel_us * 1000;
    void *params[] = {&ns};
    CUgraphExec exec = NULL;
    if (!strcmp(mode, "graph")) {
        CUgraph g;
        CUgraphNode node;
        KernelNodeParams p = {f, 1, 1, 1, 1, 1, 1, 0, params, NULL};
        check(cuGraphCreate(&g, 0), "cuGraphCreate");
        check(cuGraphAddKernelNode(&node, g, NULL, 0, &p), "cuGraphAddKernelNode");
        check(cuGraphInstantiateWithFlags(&exec, g, 0), "cuGraphInstantiateWithFlags");
    }
    LaunchConfig config = {1, 1, 1, 1, 1, 1, 0, NULL, NULL, 0};
    CUstream streams[8];
    unsigned nstreams = !strcmp(mode, "streams") ? 4 : !strcmp(mode, "streams8") ? 8 : 0;
    for (unsigned i = 0; i < nstreams; i++)
        check(cuStreamCreate(&streams[i], 0), "cuStreamCreate");
    printf("pid %d\n", (int)getpid());
    uint64_t start = now_ns(), stop = start + (uint64_t)(seconds * 1e9);
    for (unsigned n = 0; now_ns() < stop; n++) {
        if (!strcmp(mode, "kernel"))
            check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
        else if (nstreams) /* round robin: four (or eight) streams busy at once */
            check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, streams[n % nstreams], params, NULL),
                  "cuLaunchKernel");
        else if (!strcmp(mode, "ex"))
            check(cuLaunchKernelEx(&config, f, params, NULL), "cuLaunchKernelEx");
        else if (!strcmp(mode, "coop"))
            check(cuLaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params),
                  "cuLaunchCooperativeKernel");
        else
            check(cuGraphLaunch(exec, NULL), "cuGraphLaunch");
    }
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    printf("window_ns %llu\n", (unsigned long long)(now_ns() - start));
    return 0;
}

typedef struct {
    int rounds;
    size_t bytes;
    CUcontext ctx;
    CUfunction f;
    int failures;
} worker_args;

static void *worker(void *p)
{
    worker_args *w = p;
    uint64_t ns = 10000;
    void *params[] = {&ns};
    cuCtxSetCurrent(w->ctx);
    for (int i = 0; i < w->rounds; i++) {
        CUdeviceptr d;
        if (cuMemAlloc_v2(&d, w->bytes) != 0) {
            w->failures++;
            continue;
        }
        if (cuLaunchKernel(w->f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != 0)
            w->failures++;
        if (cuMemFree_v2(d) != 0)
            w->failures++;
    }
    return NULL;
}

static int threads(int ordinal, int n, int rounds, size_t bytes)
{
    use_device(ordinal);
    CUcontext ctx;
    CUdevice dev;
    check(cuDeviceGet(&dev, ordinal), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    CUfunction f = spin_function();
    pthread_t tid[64];
    worker_args args[64];
    n = n > 64 ? 64 : n;
    for (int i = 0; i < n; i++) {
        args[i] = (worker_args){rounds, bytes, ctx, f, 0};
        pthread_create(&tid[i], NULL, worker, &args[i]);
    }
    int failures = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
        failures += args[i].failures;
    }
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    size_t free_b = 0, total = 0;
    check(cuMemGetInfo_v2(&free_b, &total), "cuMemGetInfo_v2");
    printf("failures %d free %zu total %zu\n", failures, free_b, total);
    return 0;
}

/* Launches of a 1 ns kernel, allocate/free pairs and stream-ordered allocate/free pairs (on a
 * stream of the program's own, from the device's current pool), timed on the host. */
static int bench(int ordinal, int count)
{
    static const char image[] = "vgpu-standin-module\nfunc tiny 1\n";
    CUmodule mod;
    CUfunction f;
    use_device(ordinal);
    check(cuModuleLoadData(&mod, image), "cuModuleLoadData");
    check(cuModuleGetFunction(&f, mod, "tiny"), "cuModuleGetFunction");
    uint64_t start = now_ns(), cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < count; i++)
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
    uint64_t launches = now_ns() - start;
    cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu; /* without the throttle's sleeps */
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    start = now_ns();
    for (int i = 0; i < count; i++) {
        CUdeviceptr d;
        check(cuMemAlloc_v2(&d, 1 << 20), "cuMemAlloc_v2");
        check(cuMemFree_v2(d), "cuMemFree_v2");
    }
    uint64_t pairs = now_ns() - start;
    CUstream stream;
    check(cuStreamCreate(&stream, 0), "cuStreamCreate");
    start = now_ns();
    for (int i = 0; i < count; i++) { /* stream-ordered: what cudaMallocAsync/cudaFreeAsync call */
        CUdeviceptr d;
        check(cuMemAllocAsync(&d, 1 << 20, stream), "cuMemAllocAsync");
        check(cuMemFreeAsync(d, stream), "cuMemFreeAsync");
    }
    uint64_t async_pairs = now_ns() - start;
    check(cuStreamSynchronize(stream), "cuStreamSynchronize");
    start = now_ns();
    uint64_t stream_cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < count; i++) /* on a stream of its own, as frameworks launch */
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, NULL, NULL), "cuLaunchKernel");
    uint64_t stream_launches = now_ns() - start;
    stream_cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - stream_cpu;
    check(cuStreamSynchronize(stream), "cuStreamSynchronize");
    printf("launch_ns %.1f pair_ns %.1f async_pair_ns %.1f launch_cpu_ns %.1f "
           "stream_launch_ns %.1f stream_launch_cpu_ns %.1f\n",
           (double)launches / count, (double)pairs / count, (double)async_pairs / count,
           (double)cpu / count, (double)stream_launches / count, (double)stream_cpu / count);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return 2;
    CUresult rc = cuInit(0);
    if (rc != 0) {
        printf("cuInit %d\n", rc);
        return 4;
    }
    if (!strcmp(argv[1], "info"))
        return info();
    if (!strcmp(argv[1], "alloc") && argc >= 6)
        return alloc(atoi(argv[2]), argv[3], strtoull(argv[4], NULL, 10), atoi(argv[5]),
                     argc > 6 && !strcmp(argv[6], "hold"));
    if (!strcmp(argv[1], "spin") && argc == 6)
        return spin(atoi(argv[2]), atof(argv[3]), strtoull(argv[4], NULL, 10), argv[5]);
    if (!strcmp(argv[1], "threads") && argc == 6)
        return threads(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), strtoull(argv[5], NULL, 10));
    if (!strcmp(argv[1], "bench") && argc == 4)
        return bench(atoi(argv[2]), atoi(argv[3]));
    fprintf(stderr, "cuload: bad arguments\n");
    return 2;
}
