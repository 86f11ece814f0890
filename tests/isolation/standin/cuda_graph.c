/* Stand-in libcuda.so.1: CUDA graphs of kernel nodes, built by cuGraphAddKernelNode or by stream
 * capture (cuda_capture.c). Launching an executable graph runs its nodes one after another on
 * the stream, each taking simulated time like a launch; launching it into a capturing stream
 * captures its nodes instead (a graph launch is stream work like any other). */
#include <stdlib.h>
#include <string.h>

#include "cuda_local.h"

SI_EXPORT CUresult cuGraphCreate(CUgraph *g, unsigned flags) {
    if (!g || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *g = calloc(1, sizeof(struct si_graph));
    return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SI_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                        size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p) {
    (void)deps, (void)ndeps; /* nodes run in the order added, which any dependency order allows */
    if (!node || !g || !p || !p->func || g->n == 64)
        return CUDA_ERROR_INVALID_VALUE;
    struct si_gnode *n = &g->node[g->n];
    uint64_t cost = p->func->ns_per_block;
    if (!cost) {
        if (!p->kernelParams || !p->kernelParams[0])
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(&cost, p->kernelParams[0], sizeof(cost));
    }
    n->ns = (uint64_t)p->gridDimX * p->gridDimY * p->gridDimZ * cost;
    *node = n;
    g->n++;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                           size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p) {
    return cuGraphAddKernelNode(node, g, deps, ndeps, p);
}

SI_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g,
                                               unsigned long long flags) {
    (void)flags;
    if (!exec || !g)
        return CUDA_ERROR_INVALID_VALUE;
    struct si_graph *copy = malloc(sizeof(*copy));
    if (!copy)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(copy, g, sizeof(*copy));
    *exec = copy;
    return CUDA_SUCCESS;
}

/* The pre-12.0 form (the exported `cuGraphInstantiate` and `_v2` symbols keep it). */
SI_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph g, CUgraphNode *err_node,
                                         char *log, size_t log_size) {
    if (err_node)
        *err_node = NULL;
    if (log && log_size)
        log[0] = '\0';
    return cuGraphInstantiateWithFlags(exec, g, 0);
}

SI_EXPORT CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph g, CUgraphNode *err_node,
                                      char *log, size_t log_size) {
    return cuGraphInstantiate_v2(exec, g, err_node, log, log_size);
}

SI_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < exec->n; i++) {
        CUresult rc = si_cu_submit(exec->node[i].ns, s);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    free(exec);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGraphDestroy(CUgraph g) {
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    free(g);
    return CUDA_SUCCESS;
}
