/* Launch paths that once ran free of the cores throttle, for the isolation tests: work captured
 * into CUDA graphs, launches after a primary-context reset or in a process's many contexts,
 * memsets and the deprecated cuLaunchGrid. Prototypes in cudrv.h (from NVIDIA's public Driver
 * API reference); linked against libcuda.so.1 by name. Every mode prints "pid N" first and
 * "window_ns N" (the busy loop's wall time) last; kernels are the stand-in's "spin" kernel (its
 * first parameter is its time in nanoseconds per block).
 *
 *   launchpaths capture SECONDS KERNEL_US MODE   capture two kernels of KERNEL_US/2 on a stream
 *                                                in MODE (global, thread, relaxed) after a warm-up,
 *                                                print "capture RC", then launch the graph
 *   launchpaths beside SECONDS KERNEL_US         another thread holds a global-mode capture open
 *                                                while this one launches kernels; "capture RC"
 *   launchpaths reset SECONDS KERNEL_US          spin, cuDevicePrimaryCtxReset, spin again
 *   launchpaths release SECONDS KERNEL_US        spin, release the primary context's last
 *                                                retain (it is destroyed), retain it, spin again
 *   launchpaths contexts N keep|destroy SECONDS KERNEL_US
 *                                                one kernel in each of N new contexts (kept or
 *                                                destroyed), then spin in one more new context
 *   launchpaths memset SECONDS BYTES KIND        KIND: d8 (cuMemsetD8_v2), d32async
 *                                                (cuMemsetD32Async), d2d8async (on a stream)
 *   launchpaths grid SECONDS KERNEL_US           cuLaunchGrid of the spin kernel
 *   launchpaths otherdevice SECONDS KERNEL_US    GPU 0's primary context current, launches of
 *                                                a context-independent kernel (cuLibraryGetKernel)
 *                                                on a stream of GPU 1's primary context
 *   launchpaths green SECONDS KERNEL_US BURST   in turn: create a green context over the whole
 *                                                GPU, launch BURST kernels on its stream, wait,
 *                                                destroy the stream and the green context
 *   launchpaths pergpu N KERNEL_US [reset]       a thread per GPU: one launches N kernels of
 *                                                KERNEL_US on a stream of GPU 0; after its
 *                                                (N-1)th (with reset: after its Nth, then it
 *                                                resets GPU 0's primary context) the main thread
 *                                                launches one on a stream of GPU 1 and prints
 *                                                "launch_ns" (how long that asynchronous launch
 *                                                took to return)
 *   launchpaths shared SECONDS KERNEL_US         a thread launches KERNEL_US kernels on GPU 0's
 *                                                primary context for SECONDS; meanwhile the main
 *                                                thread retains that context once more and
 *                                                releases that retain (the context stays active),
 *                                                printing "release_ns" (how long it took)
 *   launchpaths query CAPTURE THREAD WHO         no loop: a capture in mode CAPTURE by this or
 *                                                another thread (WHO: same, other, captured); this
 *                                                thread, in interaction mode THREAD, queries an
 *                                                event (WHO captured: one recorded in the capture);
 *                                                prints "query RC" and "capture RC" */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudrv.h"

CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuMemsetD32Async(CUdeviceptr, unsigned, size_t, CUstream);
CUresult cuMemsetD2D8Async(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
CUresult cuFuncSetBlockShape(CUfunction, int, int, int);
CUresult cuParamSetSize(CUfunction, unsigned);
CUresult cuParamSetv(CUfunction, int, void *, unsigned);
CUresult cuLaunchGrid(CUfunction, int, int);
CUresult cuThreadExchangeStreamCaptureMode(int *);

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
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

static CUfunction use_primary(void)
{
    CUcontext ctx;
    check(cuDevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    return spin_function();
}

/* Launches KERNEL_US kernels on `stream` until `stop`. */
static void spin_until(CUfunction f, uint64_t kernel_us, CUstream stream, uint64_t stop)
{
    uint64_t ns = kernel_us * 1000;
    void *params[] = {&ns};
    while (now_ns() < stop)
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL), "cuLaunchKernel");
}

static int finish(uint64_t start)
{
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    printf("window_ns %llu\n", (unsigned long long)(now_ns() - start));
    return 0;
}

static int capture(double seconds, uint64_t kernel_us, const char *mode_name)
{
    int mode = !strcmp(mode_name, "global") ? 0 : !strcmp(mode_name, "thread") ? 1 : 2;
    CUfunction f = use_primary();
    CUstream s;
    CUgraph g = NULL;
    CUgraphExec exec;
    check(cuStreamCreate(&s, 0), "cuStreamCreate");
    uint64_t start = now_ns();
    spin_until(f, kernel_us, s, start + 50000000ull); /* warm-up, as torch.cuda.graph asks */
    check(cuStreamSynchronize(s), "cuStreamSynchronize");
    check(cuStreamBeginCapture_v2(s, mode), "cuStreamBeginCapture_v2");
    uint64_t half = kernel_us * 500;
    void *params[] = {&half};
    for (int i = 0; i < 2; i++)
        cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
    CUresult rc = cuStreamEndCapture(s, &g);
    printf("capture %d\n", rc);
    if (rc != 0)
        return 0;
    check(cuGraphInstantiateWithFlags(&exec, g, 0), "cuGraphInstantiateWithFlags");
    while (now_ns() - start < (uint64_t)(seconds * 1e9))
        check(cuGraphLaunch(exec, s), "cuGraphLaunch");
    return finish(start);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage; /* 1: capture begun, 2: the other thread is done, 3: capture ended */
    CUcontext ctx;
    CUfunction f;
    CUresult rc;
} beside_args;

static void advance(beside_args *a, int stage)
{
    pthread_mutex_lock(&a->mu);
    a->stage = stage;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void await(beside_args *a, int stage)
{
    pthread_mutex_lock(&a->mu);
    while (a->stage < stage)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

static void *capturer(void *p)
{
    beside_args *a = p;
    CUstream s;
    CUgraph g = NULL;
    uint64_t ns = 1000000;
    void *params[] = {&ns};
    check(cuCtxSetCurrent(a->ctx), "cuCtxSetCurrent");
    check(cuStreamCreate(&s, 0), "cuStreamCreate");
    check(cuStreamBeginCapture_v2(s, -a->stage), "cuStreamBeginCapture_v2");
    cuLaunchKernel(a->f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
    advance(a, 1);
    await(a, 2);
    a->rc = cuStreamEndCapture(s, &g);
    advance(a, 3);
    return NULL;
}

static int beside(double seconds, uint64_t kernel_us)
{
    beside_args a = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, NULL, 0};
    pthread_t tid;
    CUstream s;
    check(cuDevicePrimaryCtxRetain(&a.ctx, 0), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(a.ctx), "cuCtxSetCurrent");
    a.f = spin_function();
    check(cuStreamCreate(&s, 0), "cuStreamCreate");
    uint64_t start = now_ns();
    pthread_create(&tid, NULL, capturer, &a);
    await(&a, 1);
    spin_until(a.f, kernel_us, s, start + (uint64_t)(seconds * 1e9));
    advance(&a, 2);
    pthread_join(tid, NULL);
    printf("capture %d\n", a.rc);
    return finish(start);
}

/* The primary context ends in the middle: reset, or its only retain released. */
static int context_ends(double seconds, uint64_t kernel_us, int by_reset)
{
    CUfunction f = use_primary();
    uint64_t start = now_ns(), stop = start + (uint64_t)(seconds * 1e9);
    spin_until(f, kernel_us, NULL, start + (stop - start) / 4);
    if (by_reset)
        check(cuDevicePrimaryCtxReset_v2(0), "cuDevicePrimaryCtxReset_v2");
    else
        check(cuDevicePrimaryCtxRelease_v2(0), "cuDevicePrimaryCtxRelease_v2");
    f = use_primary(); /* what the CUDA runtime does on its next call after cudaDeviceReset */
    spin_until(f, kernel_us, NULL, stop);
    return finish(start);
}

static int contexts(int n, int keep, double seconds, uint64_t kernel_us)
{
    uint64_t ns = 10000;
    void *params[] = {&ns};
    CUcontext ctx;
    for (int i = 0; i < n; i++) {
        check(cuCtxCreate_v2(&ctx, 0, 0), "cuCtxCreate_v2");
        CUfunction f = spin_function();
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
        if (!keep)
            check(cuCtxDestroy_v2(ctx), "cuCtxDestroy_v2");
    }
    check(cuCtxCreate_v2(&ctx, 0, 0), "cuCtxCreate_v2");
    CUfunction f = spin_function();
    uint64_t start = now_ns();
    spin_until(f, kernel_us, NULL, start + (uint64_t)(seconds * 1e9));
    return finish(start);
}

static int memset_loop(double seconds, size_t bytes, const char *kind)
{
    CUdeviceptr d;
    CUstream s;
    use_primary();
    check(cuMemAlloc_v2(&d, bytes), "cuMemAlloc_v2");
    check(cuStreamCreate(&s, 0), "cuStreamCreate");
    uint64_t start = now_ns(), stop = start + (uint64_t)(seconds * 1e9);
    while (now_ns() < stop) {
        if (!strcmp(kind, "d8"))
            check(cuMemsetD8_v2(d, 0, bytes), "cuMemsetD8_v2");
        else if (!strcmp(kind, "d32async"))
            check(cuMemsetD32Async(d, 0, bytes / 4, NULL), "cuMemsetD32Async");
        else
            check(cuMemsetD2D8Async(d, 4096, 0, 4096, bytes / 4096, s), "cuMemsetD2D8Async");
    }
    return finish(start);
}

static int grid(double seconds, uint64_t kernel_us)
{
    CUfunction f = use_primary();
    uint64_t ns = kernel_us * 1000;
    check(cuFuncSetBlockShape(f, 1, 1, 1), "cuFuncSetBlockShape");
    check(cuParamSetv(f, 0, &ns, sizeof ns), "cuParamSetv");
    check(cuParamSetSize(f, sizeof ns), "cuParamSetSize");
    uint64_t start = now_ns();
    while (now_ns() - start < (uint64_t)(seconds * 1e9))
        check(cuLaunchGrid(f, 1, 1), "cuLaunchGrid");
    return finish(start);
}

/* A context-independent kernel (a CUkernel) of a stand-in image of one spin function. */
static void *library_spin(void)
{
    static const char image[] = "vgpu-standin-module\nfunc spin 0\n";
    void *lib, *kernel;
    check(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0), "cuLibraryLoadData");
    check(cuLibraryGetKernel(&kernel, lib, "spin"), "cuLibraryGetKernel");
    return kernel;
}

/* A CUkernel runs in its stream's context, not the current one (CUDA Driver API reference,
 * cuLaunchKernel: "the context to launch the kernel on will either be taken from the specified
 * stream hStream or the current context in case of NULL stream"): a program that keeps one GPU's
 * context current may launch a library's kernels onto every GPU's streams. */
static int other_device(double seconds, uint64_t kernel_us)
{
    CUcontext ctx0, ctx1;
    CUstream s1;
    check(cuDevicePrimaryCtxRetain(&ctx1, 1), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx1), "cuCtxSetCurrent");
    check(cuStreamCreate(&s1, 0), "cuStreamCreate");
    check(cuDevicePrimaryCtxRetain(&ctx0, 0), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx0), "cuCtxSetCurrent");
    CUfunction kernel = (CUfunction)library_spin();
    uint64_t start = now_ns();
    spin_until(kernel, kernel_us, s1, start + (uint64_t)(seconds * 1e9));
    check(cuStreamSynchronize(s1), "cuStreamSynchronize");
    printf("window_ns %llu\n", (unsigned long long)(now_ns() - start));
    return 0;
}

/* Green contexts made for a burst of work and destroyed after it (CUDA Driver API reference,
 * Green Contexts: cuDeviceGetDevResource, cuDevResourceGenerateDesc, cuGreenCtxCreate with
 * CU_GREEN_CTX_DEFAULT_STREAM, cuGreenCtxStreamCreate with CU_STREAM_NON_BLOCKING; the kernel runs
 * in its stream's context, cuLaunchKernel), the primary context staying current. */
static int green(double seconds, uint64_t kernel_us, int burst)
{
    DevResource sms;
    void *desc, *g;
    CUstream s;
    uint64_t ns = kernel_us * 1000;
    void *params[] = {&ns};
    use_primary();
    CUfunction kernel = (CUfunction)library_spin();
    check(cuDeviceGetDevResource(0, &sms, DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
    check(cuDevResourceGenerateDesc(&desc, &sms, 1), "cuDevResourceGenerateDesc");
    uint64_t start = now_ns(), stop = start + (uint64_t)(seconds * 1e9);
    while (now_ns() < stop) {
        check(cuGreenCtxCreate(&g, desc, 0, GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
        check(cuGreenCtxStreamCreate(&s, g, STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate");
        for (int i = 0; i < burst; i++)
            check(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, s, params, NULL), "cuLaunchKernel");
        check(cuStreamSynchronize(s), "cuStreamSynchronize");
        check(cuStreamDestroy_v2(s), "cuStreamDestroy_v2");
        check(cuGreenCtxDestroy(g), "cuGreenCtxDestroy");
    }
    printf("window_ns %llu\n", (unsigned long long)(now_ns() - start));
    return 0;
}

/* A thread per GPU, as NCCL's "one device per thread" and single-process multi-GPU frameworks
 * run: launches are asynchronous (CUDA Programming Guide, "Asynchronous Concurrent Execution"),
 * so GPU 1's thread is never held up by how much work GPU 0's thread has queued. A thread whose
 * GPU waits for the other's kernel (a collective) depends on it. */
typedef struct {
    beside_args sync;
    int n, reset;
    uint64_t kernel_us;
    CUstream s0;
} pergpu_args;

static void *gpu0_thread(void *p)
{
    pergpu_args *a = p;
    uint64_t ns = a->kernel_us * 1000;
    void *params[] = {&ns};
    check(cuCtxSetCurrent(a->sync.ctx), "cuCtxSetCurrent");
    for (int i = 0; i < a->n; i++) {
        if (i == a->n - 1 && !a->reset)
            advance(&a->sync, 1);
        check(cuLaunchKernel(a->sync.f, 1, 1, 1, 1, 1, 1, 0, a->s0, params, NULL),
              "cuLaunchKernel");
    }
    if (a->reset) {
        advance(&a->sync, 1);
        check(cuDevicePrimaryCtxReset_v2(0), "cuDevicePrimaryCtxReset_v2");
    }
    return NULL;
}

static int pergpu(int n, uint64_t kernel_us, int reset)
{
    pergpu_args a = {{PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, NULL, 0},
                     n, reset, kernel_us, NULL};
    CUcontext ctx1;
    CUstream s1;
    pthread_t tid;
    uint64_t ns = 1000;
    void *params[] = {&ns};
    check(cuDevicePrimaryCtxRetain(&ctx1, 1), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx1), "cuCtxSetCurrent");
    CUfunction f1 = spin_function();
    check(cuStreamCreate(&s1, 0), "cuStreamCreate");
    check(cuDevicePrimaryCtxRetain(&a.sync.ctx, 0), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(a.sync.ctx), "cuCtxSetCurrent");
    a.sync.f = spin_function();
    check(cuStreamCreate(&a.s0, 0), "cuStreamCreate");
    check(cuCtxSetCurrent(ctx1), "cuCtxSetCurrent");
    uint64_t start = now_ns();
    pthread_create(&tid, NULL, gpu0_thread, &a);
    await(&a.sync, 1);
    usleep(50000); /* GPU 0's thread is in its last launch */
    uint64_t t = now_ns();
    check(cuLaunchKernel(f1, 1, 1, 1, 1, 1, 1, 0, s1, params, NULL), "cuLaunchKernel");
    printf("launch_ns %llu\n", (unsigned long long)(now_ns() - t));
    pthread_join(tid, NULL);
    check(cuStreamSynchronize(s1), "cuStreamSynchronize");
    if (!reset)
        check(cuStreamSynchronize(a.s0), "cuStreamSynchronize");
    printf("window_ns %llu\n", (unsigned long long)(now_ns() - start));
    return 0;
}

/* A library's own retain of the primary context, released while another thread keeps its GPU
 * busy: the context stays active (cuDevicePrimaryCtxRelease), and the release waits for nothing
 * the other thread launches after it. */
typedef struct {
    CUcontext ctx;
    CUfunction f;
    CUstream s;
    uint64_t kernel_us, stop;
} shared_args;

static void *shared_launcher(void *p)
{
    shared_args *a = p;
    check(cuCtxSetCurrent(a->ctx), "cuCtxSetCurrent");
    spin_until(a->f, a->kernel_us, a->s, a->stop);
    return NULL;
}

static int shared(double seconds, uint64_t kernel_us)
{
    shared_args a = {NULL, NULL, NULL, kernel_us, 0};
    CUcontext again;
    pthread_t tid;
    check(cuDevicePrimaryCtxRetain(&a.ctx, 0), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(a.ctx), "cuCtxSetCurrent");
    a.f = spin_function();
    check(cuStreamCreate(&a.s, 0), "cuStreamCreate");
    uint64_t start = now_ns();
    a.stop = start + (uint64_t)(seconds * 1e9);
    pthread_create(&tid, NULL, shared_launcher, &a);
    usleep(300000);
    check(cuDevicePrimaryCtxRetain(&again, 0), "cuDevicePrimaryCtxRetain");
    uint64_t t = now_ns();
    check(cuDevicePrimaryCtxRelease_v2(0), "cuDevicePrimaryCtxRelease_v2");
    printf("release_ns %llu\n", (unsigned long long)(now_ns() - t));
    pthread_join(tid, NULL);
    return finish(start);
}

static int mode_of(const char *name)
{
    return !strcmp(name, "global") ? 0 : !strcmp(name, "thread") ? 1 : 2;
}

static int query(const char *capture_mode, const char *thread_mode, const char *who)
{
    beside_args a = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, NULL, 0};
    CUstream s;
    CUevent e;
    CUgraph g = NULL;
    pthread_t tid;
    int mode = mode_of(thread_mode);
    a.f = use_primary();
    check(cuDevicePrimaryCtxRetain(&a.ctx, 0), "cuDevicePrimaryCtxRetain");
    check(cuEventCreate(&e, 0), "cuEventCreate");
    check(cuStreamCreate(&s, 0), "cuStreamCreate");
    check(cuEventRecord(e, s), "cuEventRecord");
    if (!strcmp(who, "other")) {
        a.stage = -mode_of(capture_mode); /* the capturer reads its mode from here */
        pthread_create(&tid, NULL, capturer, &a);
        await(&a, 1);
    } else {
        check(cuStreamBeginCapture_v2(s, mode_of(capture_mode)), "cuStreamBeginCapture_v2");
        if (!strcmp(who, "captured"))
            check(cuEventRecord(e, s), "cuEventRecord");
    }
    check(cuThreadExchangeStreamCaptureMode(&mode), "cuThreadExchangeStreamCaptureMode");
    printf("query %d\n", cuEventQuery(e));
    if (!strcmp(who, "other")) {
        advance(&a, 2);
        pthread_join(tid, NULL);
        printf("capture %d\n", a.rc);
    } else {
        printf("capture %d\n", cuStreamEndCapture(s, &g));
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 4)
        return 2;
    check(cuInit(0), "cuInit");
    printf("pid %d\n", (int)getpid());
    double seconds = atof(argv[2]);
    if (!strcmp(argv[1], "capture") && argc == 5)
        return capture(seconds, strtoull(argv[3], NULL, 10), argv[4]);
    if (!strcmp(argv[1], "beside"))
        return beside(seconds, strtoull(argv[3], NULL, 10));
    if (!strcmp(argv[1], "reset") || !strcmp(argv[1], "release"))
        return context_ends(seconds, strtoull(argv[3], NULL, 10), !strcmp(argv[1], "reset"));
    if (!strcmp(argv[1], "memset") && argc == 5)
        return memset_loop(seconds, strtoull(argv[3], NULL, 10), argv[4]);
    if (!strcmp(argv[1], "query") && argc == 5)
        return query(argv[2], argv[3], argv[4]);
    if (!strcmp(argv[1], "green") && argc == 5)
        return green(seconds, strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(argv[1], "otherdevice"))
        return other_device(seconds, strtoull(argv[3], NULL, 10));
    if (!strcmp(argv[1], "shared"))
        return shared(seconds, strtoull(argv[3], NULL, 10));
    if (!strcmp(argv[1], "pergpu"))
        return pergpu(atoi(argv[2]), strtoull(argv[3], NULL, 10),
                      argc == 5 && !strcmp(argv[4], "reset"));
    if (!strcmp(argv[1], "grid"))
        return grid(seconds, strtoull(argv[3], NULL, 10));
    if (!strcmp(argv[1], "contexts") && argc == 6)
        return contexts(atoi(argv[2]), !strcmp(argv[3], "keep"), atof(argv[4]),
                        strtoull(argv[5], NULL, 10));
    fprintf(stderr, "launchpaths: bad arguments\n");
    return 2;
}
