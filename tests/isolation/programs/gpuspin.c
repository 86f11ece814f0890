/* The real-GPU program of hack/gpu-check.sh: hand-written PTX kernels, one that spins on %clock64
 * for a given number of cycles and one of a fixed amount of work, JIT-compiled by the driver
 * (cuModuleLoadData; no nvcc), plus the memory queries. Prototypes in cudrv.h (from NVIDIA's
 * public Driver API reference).
 *
 *   gpuspin mem BYTES COUNT       cuMemGetInfo total, then COUNT allocations' result codes
 *   gpuspin spin SECONDS US       kernels of US microseconds for SECONDS; prints kernels, window
 *   gpuspin work SECONDS ITERS [SETTLE]
 *                                 the same with a kernel of a fixed amount of work (ITERS dependent
 *                                 steps), counted after SETTLE seconds (default 0): it advances
 *                                 only while the GPU runs it, so its rate over the rate alone is
 *                                 the share of the GPU it got, also when time-sliced with a
 *                                 neighbour (a %clock64 spin ends on time whoever ran meanwhile)
 *   gpuspin reset SECONDS US      20 kernels, cuDevicePrimaryCtxReset (what cudaDeviceReset does),
 *                                 the primary context retained again, then as spin
 *   gpuspin graph SECONDS US      after a warm-up, one such kernel captured into a graph on a
 *                                 stream (global capture mode, torch.cuda.graph's default), then
 *                                 the graph launched for SECONDS; prints the capture's code too
 *   gpuspin streams SECONDS US    as spin, round robin over eight streams at once (their spans
 *                                 overlap on the GPU: vgpu-core charges the overlap once)
 *   gpuspin green SECONDS US [BURST]
 *                                 in turn for SECONDS: a green context over the whole GPU, BURST
 *                                 (default 32) such kernels of a context-independent library on
 *                                 its stream, wait, destroy the stream and the green context
 *                                 (vgpu-core charges the burst at cuGreenCtxDestroy)
 *   gpuspin pace SECONDS US GAP   a kernel every GAP microseconds: too seldom for a cores limit of
 *                                 50 to hold one back, so under it each launch is measured and
 *                                 none waits; prints the thread's CPU time inside cuLaunchKernel
 *                                 per launch (what vgpu-core adds to a launch under a limit) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CUDRV_JSON_ERRORS
#include "cudrv.h"

static const char ptx[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry spin(.param .u64 cycles)\n{\n"
    "  .reg .u64 %t0, %t1, %d, %c;\n  .reg .pred %p;\n"
    "  ld.param.u64 %c, [cycles];\n  mov.u64 %t0, %clock64;\n"
    "LOOP:\n  mov.u64 %t1, %clock64;\n  sub.u64 %d, %t1, %t0;\n"
    "  setp.lt.u64 %p, %d, %c;\n  @%p bra LOOP;\n  ret;\n}\n"
    /* ITERS steps of a 64-bit LCG; the store that never runs (its address is 0) keeps the JIT
     * from dropping the loop. */
    ".visible .entry work(.param .u64 iters, .param .u64 sink)\n{\n"
    "  .reg .u64 %i, %n, %x, %a;\n  .reg .pred %q;\n"
    "  ld.param.u64 %n, [iters];\n  ld.param.u64 %a, [sink];\n"
    "  mov.u64 %i, 0;\n  mov.u64 %x, 1;\n"
    "WORK:\n  mad.lo.u64 %x, %x, 6364136223846793005, 1442695040888963407;\n"
    "  add.u64 %i, %i, 1;\n  setp.lt.u64 %q, %i, %n;\n  @%q bra WORK;\n"
    "  setp.ne.u64 %q, %x, 0;\n  @%q bra DONE;\n  st.global.u64 [%a], %x;\n"
    "DONE:\n  ret;\n}\n";

#define CU_DEVICE_ATTRIBUTE_CLOCK_RATE 13 /* kHz */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int mem(size_t bytes, int count)
{
    size_t free_b = 0, total = 0;
    check(cuMemGetInfo_v2(&free_b, &total), "cuMemGetInfo_v2");
    printf("{\"total\": %zu, \"codes\": [", total);
    for (int i = 0; i < count; i++) {
        CUdeviceptr p;
        printf("%s%d", i ? ", " : "", cuMemAlloc_v2(&p, bytes));
    }
    printf("]}\n");
    return 0;
}

static CUfunction kernel(const char *name)
{
    CUmodule mod;
    CUfunction f;
    check(cuModuleLoadData(&mod, ptx), "cuModuleLoadData");
    check(cuModuleGetFunction(&f, mod, name), "cuModuleGetFunction");
    return f;
}

static CUfunction spin_kernel(void) { return kernel("spin"); }

static uint64_t cycles_of(double us)
{
    int khz = 0;
    check(cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0), "cuDeviceGetAttribute");
    return (uint64_t)(us * khz / 1000.0);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int pace(double seconds, double us, double gap_us)
{
    CUfunction f = spin_kernel();
    uint64_t cycles = cycles_of(us);
    void *params[] = {&cycles};
    struct timespec gap = {0, (long)(gap_us * 1000)};
    long kernels = 0;
    double in_launch = 0, start = now_s();
    while (now_s() - start < seconds) {
        double before = cpu_s();
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
        in_launch += cpu_s() - before;
        kernels++;
        nanosleep(&gap, NULL);
    }
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    printf("{\"kernels\": %ld, \"window_s\": %.4f, \"launch_cpu_ns\": %.1f}\n", kernels,
           now_s() - start, kernels ? 1e9 * in_launch / (double)kernels : 0.0);
    return 0;
}

static int graph(double seconds, double us)
{
    CUfunction f = spin_kernel();
    uint64_t cycles = cycles_of(us);
    void *params[] = {&cycles};
    CUstream s;
    CUgraph g = NULL;
    CUgraphExec exec;
    check(cuStreamCreate(&s, 0), "cuStreamCreate");
    for (int i = 0; i < 20; i++)
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL), "cuLaunchKernel");
    check(cuStreamSynchronize(s), "cuStreamSynchronize");
    check(cuStreamBeginCapture_v2(s, 0), "cuStreamBeginCapture_v2");
    CUresult launched = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
    CUresult captured = cuStreamEndCapture(s, &g);
    if (launched != 0 || captured != 0) {
        CUresult rc = captured ? captured : launched;
        printf("{\"kernels\": 0, \"window_s\": 1, \"capture\": %d}\n", rc);
        return 0;
    }
    check(cuGraphInstantiateWithFlags(&exec, g, 0), "cuGraphInstantiateWithFlags");
    long kernels = 0;
    double start = now_s();
    while (now_s() - start < seconds) {
        check(cuGraphLaunch(exec, s), "cuGraphLaunch");
        kernels++;
    }
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    double window = now_s() - start;
    printf("{\"kernels\": %ld, \"window_s\": %.4f, \"capture\": 0}\n", kernels, window);
    return 0;
}

/* Kernels of f with params, one after another on the null stream: SETTLE seconds uncounted
 * (a neighbour's outer loop converging), then SECONDS counted. */
static int launch_for(double settle, double seconds, CUfunction f, void **params)
{
    long kernels = 0;
    double start = now_s();
    while (now_s() - start < settle)
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
    start = now_s();
    while (now_s() - start < seconds) {
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
        kernels++;
    }
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    printf("{\"kernels\": %ld, \"window_s\": %.4f}\n", kernels, now_s() - start);
    return 0;
}

/* Spin kernels round robin over eight streams for SECONDS. */
static int streams(double seconds, double us)
{
    CUfunction f = spin_kernel();
    uint64_t cycles = cycles_of(us);
    void *params[] = {&cycles};
    CUstream s[8];
    for (int i = 0; i < 8; i++)
        check(cuStreamCreate(&s[i], 0), "cuStreamCreate");
    long kernels = 0;
    double start = now_s();
    while (now_s() - start < seconds) {
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s[kernels % 8], params, NULL),
              "cuLaunchKernel");
        kernels++;
    }
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    printf("{\"kernels\": %ld, \"window_s\": %.4f}\n", kernels, now_s() - start);
    return 0;
}

static int spin(double seconds, double us)
{
    CUfunction f = spin_kernel();
    uint64_t cycles = cycles_of(us);
    void *params[] = {&cycles};
    return launch_for(0, seconds, f, params);
}

static int work(double seconds, uint64_t iters, double settle)
{
    CUfunction f = kernel("work");
    CUdeviceptr sink = 0;
    void *params[] = {&iters, &sink};
    return launch_for(settle, seconds, f, params);
}

/* The cudaDeviceReset sequence: the context's modules and events are gone after the reset; the
 * runtime retains the primary context again on its next call. */
static int reset(double seconds, double us)
{
    CUfunction f = spin_kernel();
    uint64_t cycles = cycles_of(us);
    void *params[] = {&cycles};
    CUcontext ctx;
    for (int i = 0; i < 20; i++)
        check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    check(cuDevicePrimaryCtxReset_v2(0), "cuDevicePrimaryCtxReset_v2");
    check(cuDevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    return spin(seconds, us);
}

/* Green contexts made for a burst of work and destroyed after it (CUDA Driver API reference,
 * Green Contexts: cuDeviceGetDevResource, cuDevResourceGenerateDesc, cuGreenCtxCreate with
 * CU_GREEN_CTX_DEFAULT_STREAM, cuGreenCtxStreamCreate with CU_STREAM_NON_BLOCKING). A module's
 * function belongs to the context it was loaded in, so the kernel comes from a library
 * (cuLibraryLoadData, cuLibraryGetKernel), which runs in its stream's context (cuLaunchKernel). */
static int green(double seconds, double us, int burst)
{
    union { DevResource resource; unsigned char room[4096]; } sms; /* room for a larger struct */
    void *lib, *spin_k, *desc, *g;
    CUstream s;
    uint64_t cycles = cycles_of(us);
    void *params[] = {&cycles};
    memset(&sms, 0, sizeof sms);
    check(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), "cuLibraryLoadData");
    check(cuLibraryGetKernel(&spin_k, lib, "spin"), "cuLibraryGetKernel");
    check(cuDeviceGetDevResource(0, &sms.resource, DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
    check(cuDevResourceGenerateDesc(&desc, &sms.resource, 1), "cuDevResourceGenerateDesc");
    long kernels = 0;
    double start = now_s();
    while (now_s() - start < seconds) {
        check(cuGreenCtxCreate(&g, desc, 0, GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
        check(cuGreenCtxStreamCreate(&s, g, STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate");
        for (int i = 0; i < burst; i++, kernels++)
            check(cuLaunchKernel((CUfunction)spin_k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL),
                  "cuLaunchKernel");
        check(cuStreamSynchronize(s), "cuStreamSynchronize");
        check(cuStreamDestroy_v2(s), "cuStreamDestroy_v2");
        check(cuGreenCtxDestroy(g), "cuGreenCtxDestroy");
    }
    printf("{\"kernels\": %ld, \"window_s\": %.4f}\n", kernels, now_s() - start);
    return 0;
}

int main(int argc, char **argv)
{
    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    if (argc == 4 && !strcmp(argv[1], "mem"))
        return mem(strtoull(argv[2], NULL, 10), atoi(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "spin"))
        return spin(atof(argv[2]), atof(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "graph"))
        return graph(atof(argv[2]), atof(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "reset"))
        return reset(atof(argv[2]), atof(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "streams"))
        return streams(atof(argv[2]), atof(argv[3]));
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "green"))
        return green(atof(argv[2]), atof(argv[3]), argc == 5 ? atoi(argv[4]) : 32);
    if (argc == 5 && !strcmp(argv[1], "pace"))
        return pace(atof(argv[2]), atof(argv[3]), atof(argv[4]));
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "work"))
        return work(atof(argv[2]), strtoull(argv[3], NULL, 10), argc == 5 ? atof(argv[4]) : 0);
    fprintf(stderr, "usage: gpuspin mem BYTES COUNT | gpuspin spin|graph|reset|streams SECONDS US | "
                    "gpuspin green SECONDS US [BURST] | "
                    "gpuspin work SECONDS ITERS [SETTLE] | gpuspin pace SECONDS US GAP\n");
    return 2;
}
