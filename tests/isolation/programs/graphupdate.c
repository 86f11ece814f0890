/* One executable graph whose work changes every step, as XLA and JAX programs update theirs: each
 * step runs it SHORT_RUNS times with one short kernel, then LONG_RUNS times with a long one (the
 * same kernel over a grid LONG_US/SHORT_US times larger), for SECONDS. Prototypes in cudrv.h (from
 * NVIDIA's public Driver API reference); kernels are the stand-in's "spin" kernel (its first
 * parameter is its time in nanoseconds per block).
 *
 *   graphupdate HOW SECONDS SHORT_US LONG_US
 *
 * HOW says how the work changes between the short and the long runs:
 *   update    cuGraphExecUpdate_v2 from a graph of one short or one long kernel node
 *   kernel    cuGraphExecKernelNodeSetParams_v2 on the executable graph's one kernel node
 *   node      cuGraphExecNodeSetParams (CU_GRAPH_NODE_TYPE_KERNEL) on that node
 *   child     cuGraphExecChildGraphNodeSetParams on its one child graph node (cloned from a graph
 *             of one kernel node), from a graph of one short or one long kernel node
 *   recreate  cuGraphExecDestroy, then cuGraphInstantiateWithFlags of the other graph: the new
 *             executable graph usually has the destroyed one's address
 *
 * Prints "pid N", "steps N", "reused N" (how many instantiations answered the address of the
 * executable graph destroyed just before; recreate only, else 0) and "window_ns N" last. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudrv.h"

enum { SHORT_RUNS = 8, LONG_RUNS = 4 };

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

static uint64_t block_ns; /* the spin kernel's time per block: SHORT_US */
static void *kernel_args[] = {&block_ns};

static KernelNodeParamsV2 kernel_of(CUfunction f, unsigned blocks)
{
    KernelNodeParamsV2 p;
    memset(&p, 0, sizeof p);
    p.func = f;
    p.grid_x = blocks;
    p.grid_y = p.grid_z = p.block_x = p.block_y = p.block_z = 1;
    p.params = kernel_args;
    return p;
}

/* A graph of one kernel node of `blocks` blocks (its node in *node). */
static CUgraph one_kernel(CUfunction f, unsigned blocks, CUgraphNode *node)
{
    CUgraph g;
    CUgraphNode n;
    KernelNodeParamsV2 p = kernel_of(f, blocks);
    check(cuGraphCreate(&g, 0), "cuGraphCreate");
    check(cuGraphAddKernelNode_v2(node ? node : &n, g, NULL, 0, &p), "cuGraphAddKernelNode_v2");
    return g;
}

typedef struct {
    const char *how;
    CUfunction f;
    CUgraph graph[2]; /* update, child, recreate: the short and the long work */
    CUgraph parent;   /* child: the graph instantiated, with one child graph node */
    CUgraphNode node; /* kernel, node: the kernel node; child: the child graph node */
    CUgraphExec exec;
    long reused;
} program;

/* Makes the executable graph run the short (0) or the long (1) work. */
static void set_work(program *p, int which, unsigned blocks)
{
    if (!strcmp(p->how, "update")) {
        UpdateResultInfo info;
        check(cuGraphExecUpdate_v2(p->exec, p->graph[which], &info), "cuGraphExecUpdate_v2");
    } else if (!strcmp(p->how, "kernel")) {
        KernelNodeParamsV2 k = kernel_of(p->f, blocks);
        check(cuGraphExecKernelNodeSetParams_v2(p->exec, p->node, &k),
              "cuGraphExecKernelNodeSetParams_v2");
    } else if (!strcmp(p->how, "node")) {
        NodeParams any;
        memset(&any, 0, sizeof any);
        any.type = 0; /* CU_GRAPH_NODE_TYPE_KERNEL */
        any.u.kernel = kernel_of(p->f, blocks);
        check(cuGraphExecNodeSetParams(p->exec, p->node, &any), "cuGraphExecNodeSetParams");
    } else if (!strcmp(p->how, "child")) {
        check(cuGraphExecChildGraphNodeSetParams(p->exec, p->node, p->graph[which]),
              "cuGraphExecChildGraphNodeSetParams");
    } else { /* recreate */
        CUgraphExec old = p->exec;
        check(cuGraphExecDestroy(old), "cuGraphExecDestroy");
        check(cuGraphInstantiateWithFlags(&p->exec, p->graph[which], 0),
              "cuGraphInstantiateWithFlags");
        p->reused += p->exec == old;
    }
}

static void setup(program *p, unsigned long_blocks)
{
    p->f = spin_function();
    CUgraph first;
    if (!strcmp(p->how, "kernel") || !strcmp(p->how, "node")) {
        first = one_kernel(p->f, 1, &p->node);
    } else {
        p->graph[0] = one_kernel(p->f, 1, NULL);
        p->graph[1] = one_kernel(p->f, long_blocks, NULL);
        first = p->graph[0];
    }
    if (!strcmp(p->how, "child")) {
        NodeParams any;
        memset(&any, 0, sizeof any);
        any.type = 4; /* CU_GRAPH_NODE_TYPE_GRAPH */
        any.u.child.graph = p->graph[0];
        any.u.child.ownership = 0; /* CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE */
        check(cuGraphCreate(&p->parent, 0), "cuGraphCreate");
        check(cuGraphAddNode(&p->node, p->parent, NULL, 0, &any), "cuGraphAddNode");
        first = p->parent;
    }
    check(cuGraphInstantiateWithFlags(&p->exec, first, 0), "cuGraphInstantiateWithFlags");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 5) {
        fprintf(stderr, "graphupdate: bad arguments\n");
        return 2;
    }
    program p;
    memset(&p, 0, sizeof p);
    p.how = argv[1];
    double seconds = atof(argv[2]);
    uint64_t short_us = strtoull(argv[3], NULL, 10), long_us = strtoull(argv[4], NULL, 10);
    unsigned long_blocks = (unsigned)(long_us / short_us);
    block_ns = short_us * 1000;
    check(cuInit(0), "cuInit");
    printf("pid %d\n", (int)getpid());
    use_device(0);
    CUstream s;
    check(cuStreamCreate(&s, 0), "cuStreamCreate");
    setup(&p, long_blocks);
    long steps = 0;
    uint64_t start = now_ns();
    while (now_ns() - start < (uint64_t)(seconds * 1e9)) {
        if (steps > 0)
            set_work(&p, 0, 1);
        for (int i = 0; i < SHORT_RUNS; i++)
            check(cuGraphLaunch(p.exec, s), "cuGraphLaunch");
        set_work(&p, 1, long_blocks);
        for (int i = 0; i < LONG_RUNS; i++)
            check(cuGraphLaunch(p.exec, s), "cuGraphLaunch");
        steps++;
    }
    check(cuStreamSynchronize(s), "cuStreamSynchronize");
    printf("steps %ld\nreused %ld\n", steps, p.reused);
    printf("window_ns %llu\n", (unsigned long long)(now_ns() - start));
    return 0;
}
