/* Stand-in libcuda.so.1: CUDA graphs of kernel nodes, built by cuGraphAddKernelNode or by stream
 * capture (cuda_capture.c), and memory nodes. Launching an executable graph runs its nodes one
 * after another on the stream, each kernel taking simulated time like a launch; launching it into
 * a capturing stream captures its kernel nodes instead (a graph launch is stream work like any
 * other). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_local.h"

static CUresult graph_mem_run(const struct si_gnode *n);

SI_EXPORT CUresult cuGraphCreate(CUgraph *g, unsigned flags) {
    if (!g || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *g = calloc(1, sizeof(struct si_graph));
    return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* A kernel node's simulated time: its grid's blocks times the function's cost per block (the
 * "spin" function's from its first parameter). */
static CUresult kernel_ns(const CUDA_KERNEL_NODE_PARAMS *p, uint64_t *ns) {
    if (!p || !p->func)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t cost = p->func->ns_per_block;
    if (!cost) {
        if (!p->kernelParams || !p->kernelParams[0])
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(&cost, p->kernelParams[0], sizeof(cost));
    }
    *ns = (uint64_t)p->gridDimX * p->gridDimY * p->gridDimZ * cost;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                        size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p) {
    (void)deps, (void)ndeps; /* nodes run in the order added, which any dependency order allows */
    uint64_t ns = 0;
    if (!node || !g || g->n == 64 || kernel_ns(p, &ns) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    struct si_gnode *n = &g->node[g->n];
    memset(n, 0, sizeof(*n));
    n->ns = ns;
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
    if (!exec || !g || g->owner) /* a moved child "Cannot be independently instantiated" */
        return CUDA_ERROR_INVALID_VALUE;
    struct si_graph *copy = malloc(sizeof(*copy));
    if (!copy)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(copy, g, sizeof(*copy));
    copy->source = g;
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
        const struct si_gnode *n = &exec->node[i];
        CUresult rc = n->mem ? graph_mem_run(n) : si_cu_submit(n->ns, s);
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

/* ---- updating an executable graph ----
 * CUDA Driver API reference, Graph Management: cuGraphExecKernelNodeSetParams "Sets the
 * parameters of a kernel node in an executable graph hGraphExec. The node is identified by the
 * corresponding node hNode in the non-executable graph, from which the executable graph was
 * instantiated"; "All nodeParams fields may change" (the function within its owning context);
 * "The modifications only affect future launches of hGraphExec. Already enqueued or running
 * launches of hGraphExec are not affected by this call" (likewise cuGraphExecNodeSetParams,
 * cuGraphExecChildGraphNodeSetParams and cuGraphExecUpdate). cuGraphExecChildGraphNodeSetParams
 * "Updates the work represented by hNode in hGraphExec as though the nodes contained in hNode's
 * graph had the parameters contained in childGraph's nodes at instantiation"; "The topology of
 * childGraph, as well as the node insertion order, must match". cuGraphExecUpdate "Updates the
 * node parameters in the instantiated graph specified by hGraphExec with the node parameters in
 * a topologically identical graph specified by hGraph"; when it cannot, it answers
 * CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE and leaves hGraphExec as it was. The exported
 * cuGraphExecKernelNodeSetParams and cuGraphExecUpdate keep the pre-12.0 forms (the v1 kernel
 * parameters, whose leading fields are the same; the error node and result out-parameters); the
 * `_v2` symbols are the 12.0 forms. The model: memory nodes cannot change, kernel nodes take new
 * times. */
enum { SI_UPDATE_FAILURE = 910, SI_UPDATE_TOPOLOGY_CHANGED = 2, SI_UPDATE_NODE_TYPE_CHANGED = 3 };

typedef struct { /* CUgraphExecUpdateResultInfo */
    int result;
    CUgraphNode errorNode;
    CUgraphNode errorFromNode;
} si_update_info;

/* The index of the executable graph's node that `node` (of the graph it came from) names, or -1. */
static int exec_node(CUgraphExec exec, CUgraphNode node) {
    if (!exec || !exec->source || !node)
        return -1;
    uintptr_t first = (uintptr_t)&exec->source->node[0], at = (uintptr_t)node;
    if (at < first || (at - first) % sizeof(struct si_gnode))
        return -1;
    uintptr_t i = (at - first) / sizeof(struct si_gnode);
    return i < (uintptr_t)exec->n ? (int)i : -1;
}

static CUresult exec_kernel(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p) {
    int i = exec_node(exec, node);
    uint64_t ns = 0;
    if (i < 0 || exec->node[i].mem || exec->node[i].child || kernel_ns(p, &ns) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    exec->node[i].ns = ns;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                     const CUDA_KERNEL_NODE_PARAMS *p) {
    return exec_kernel(exec, node, p);
}

SI_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                  const CUDA_KERNEL_NODE_PARAMS *p) {
    return exec_kernel(exec, node, p);
}

/* 1 when `n` nodes of `from` can replace those at `to`: the same kinds, memory nodes unchanged. */
static int same_topology(const struct si_gnode *to, const struct si_gnode *from, int n) {
    for (int i = 0; i < n; i++)
        if (to[i].mem != from[i].mem || to[i].dptr != from[i].dptr ||
            (i > 0 && to[i].child != from[i].child))
            return 0;
    return 1;
}

static void take_times(struct si_gnode *to, const struct si_gnode *from, int n) {
    for (int i = 0; i < n; i++)
        to[i].ns = from[i].ns;
}

SI_EXPORT CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                      CUgraph child) {
    int i = exec_node(exec, node);
    if (i < 0 || !child || exec->node[i].child != child->n ||
        !same_topology(&exec->node[i], child->node, child->n))
        return CUDA_ERROR_INVALID_VALUE;
    take_times(&exec->node[i], child->node, child->n);
    return CUDA_SUCCESS;
}

static CUresult exec_update(CUgraphExec exec, CUgraph g, int *result) {
    *result = SI_UPDATE_TOPOLOGY_CHANGED;
    if (!exec || !g)
        return CUDA_ERROR_INVALID_VALUE;
    if (exec->n != g->n || !same_topology(exec->node, g->node, g->n) ||
        (g->n && exec->node[0].child != g->node[0].child))
        return SI_UPDATE_FAILURE;
    take_times(exec->node, g->node, g->n);
    *result = 0; /* CU_GRAPH_EXEC_UPDATE_SUCCESS */
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph g, si_update_info *info) {
    int result = 0;
    CUresult rc = exec_update(exec, g, &result);
    if (info) {
        memset(info, 0, sizeof(*info));
        info->result = result;
    }
    return rc;
}

SI_EXPORT CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph g, CUgraphNode *error_node,
                                     int *result_out) {
    int result = 0;
    CUresult rc = exec_update(exec, g, &result);
    if (error_node)
        *error_node = NULL;
    if (result_out)
        *result_out = result;
    return rc;
}

/* A graph goes with the child graphs moved into it (cuGraphAddNode, below). */
static void destroy_tree(struct si_graph *g) {
    while (g->owned) {
        struct si_graph *child = g->owned;
        g->owned = child->next_owned;
        destroy_tree(child);
    }
    free(g);
}

SI_EXPORT CUresult cuGraphDestroy(CUgraph g) {
    if (!g || g->owner) /* a moved child "Cannot be independently ... destroyed" */
        return CUDA_ERROR_INVALID_VALUE;
    destroy_tree(g);
    return CUDA_SUCCESS;
}

/* ---- graph memory nodes ----
 * CUDA Programming Guide, "Graph Memory Nodes": "CUDA assigns virtual addresses for the graph
 * allocation at node creation time"; an allocation's lifetime "begins when GPU execution reaches
 * the allocating graph node and ends when" a free node, cuMemFreeAsync or cuMemFree frees it,
 * and "Graph destruction does not automatically free any live graph-allocated memory". Freed
 * graph memory stays cached for graphs on its device until cuDeviceGraphMemTrim, which frees
 * "Blocks which are not in use by a graph that is either currently executing or scheduled to
 * execute". cuGraphAddMemAllocNode: the allocation is on nodeParams->poolProps.location and its
 * address is returned in nodeParams->dptr. cuDeviceGetGraphMemAttribute:
 * CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT (0) and _RESERVED_MEM_CURRENT (2). The model: one physical
 * block per allocation, taken when a launch reaches its node and kept until trimmed. */

#define SI_GRAPH_ALLOCS 256

typedef struct { /* CUDA_MEM_ALLOC_NODE_PARAMS */
    CUmemPoolProps poolProps;
    const void *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;
} si_mem_alloc_params;

static struct {
    CUdeviceptr dptr; /* 0: entry free */
    int dev;
    int live;
    uint64_t bytes;
    unsigned long long block; /* the physical memory (an SI_POOL allocation); 0: none */
} graph_mem[SI_GRAPH_ALLOCS];
static pthread_mutex_t graph_mu = PTHREAD_MUTEX_INITIALIZER;

static int graph_entry(CUdeviceptr dptr) {
    for (int i = 0; dptr && i < SI_GRAPH_ALLOCS; i++)
        if (graph_mem[i].dptr == dptr)
            return i;
    return -1;
}

static CUresult add_mem_node(CUgraphNode *node, CUgraph g, int mem, CUdeviceptr dptr) {
    /* a moved child graph "Cannot have additional memory allocation or free nodes added" */
    if (!node || !g || g->n == 64 || g->owner)
        return CUDA_ERROR_INVALID_VALUE;
    struct si_gnode *n = &g->node[g->n++];
    memset(n, 0, sizeof(*n));
    n->mem = mem;
    n->dptr = dptr;
    *node = n;
    return CUDA_SUCCESS;
}

CUresult si_cu_graph_alloc(CUgraphNode *node, struct si_graph *g, int dev, uint64_t bytes,
                           CUdeviceptr *dptr) {
    static CUdeviceptr next = 0x7d0000000000ull;
    CUresult rc;
    struct si_node *sn = si_cu_node(&rc);
    if (!sn)
        return rc;
    if (!bytes || dev < 0 || dev >= sn->cfg.ngpus)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_mu);
    int slot = -1;
    for (int i = 0; slot < 0 && i < SI_GRAPH_ALLOCS; i++)
        slot = graph_mem[i].dptr ? -1 : i;
    CUdeviceptr at = next;
    rc = slot < 0 ? CUDA_ERROR_OUT_OF_MEMORY : add_mem_node(node, g, SI_GRAPH_ALLOC, at);
    if (rc == CUDA_SUCCESS) {
        next += (bytes + 0xfffff) / 0x100000 * 0x100000 + 0x100000;
        graph_mem[slot].dptr = at;
        graph_mem[slot].dev = dev;
        graph_mem[slot].bytes = bytes;
        *dptr = at;
    }
    pthread_mutex_unlock(&graph_mu);
    return rc;
}

SI_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                          size_t ndeps, si_mem_alloc_params *p) {
    (void)deps, (void)ndeps;
    if (!p || si_location_dev(p->poolProps.location) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    return si_cu_graph_alloc(node, g, si_location_dev(p->poolProps.location), p->bytesize,
                             &p->dptr);
}

int si_cu_graph_alloc_is(const struct si_gnode *n, int dev, uint64_t bytes) {
    pthread_mutex_lock(&graph_mu);
    int i = n->mem == SI_GRAPH_ALLOC ? graph_entry(n->dptr) : -1;
    int same = i >= 0 && graph_mem[i].dev == dev && graph_mem[i].bytes == bytes;
    pthread_mutex_unlock(&graph_mu);
    return same;
}

CUresult si_cu_graph_free_node(CUgraphNode *node, struct si_graph *g, CUdeviceptr dptr) {
    pthread_mutex_lock(&graph_mu);
    int known = graph_entry(dptr) >= 0;
    pthread_mutex_unlock(&graph_mu);
    return known ? add_mem_node(node, g, SI_GRAPH_FREE, dptr) : CUDA_ERROR_INVALID_VALUE;
}

SI_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                         size_t ndeps, CUdeviceptr dptr) {
    (void)deps, (void)ndeps;
    return si_cu_graph_free_node(node, g, dptr);
}

/* A launch reaching an allocation node: the allocation must not be live (it was freed since the
 * last launch); its block is reused when still cached, taken from the device otherwise. */
static CUresult graph_mem_run(const struct si_gnode *n) {
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&graph_mu);
    int i = graph_entry(n->dptr);
    if (i < 0 || graph_mem[i].live == (n->mem == SI_GRAPH_ALLOC))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (n->mem == SI_GRAPH_ALLOC && !graph_mem[i].block)
        rc = si_cu_take(NULL, graph_mem[i].dev, graph_mem[i].bytes, SI_POOL, &graph_mem[i].block);
    if (rc == CUDA_SUCCESS)
        graph_mem[i].live = n->mem == SI_GRAPH_ALLOC;
    pthread_mutex_unlock(&graph_mu);
    return rc;
}

int si_cu_graph_free(CUdeviceptr dptr) {
    pthread_mutex_lock(&graph_mu);
    int i = graph_entry(dptr);
    int freed = i >= 0 && graph_mem[i].live;
    if (freed)
        graph_mem[i].live = 0;
    pthread_mutex_unlock(&graph_mu);
    return freed;
}

SI_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
    pthread_mutex_lock(&graph_mu);
    for (int i = 0; i < SI_GRAPH_ALLOCS; i++) {
        if (graph_mem[i].dptr && graph_mem[i].dev == dev && !graph_mem[i].live &&
            graph_mem[i].block && si_cu_give(graph_mem[i].block, SI_POOL) == CUDA_SUCCESS)
            graph_mem[i].block = 0;
    }
    pthread_mutex_unlock(&graph_mu);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, int attr, void *value) {
    cuuint64_t total = 0;
    if (!value || (attr != 0 && attr != 2))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_mu);
    for (int i = 0; i < SI_GRAPH_ALLOCS; i++)
        if (graph_mem[i].dptr && graph_mem[i].dev == dev &&
            (attr == 0 ? graph_mem[i].live : graph_mem[i].block != 0))
            total += graph_mem[i].bytes;
    pthread_mutex_unlock(&graph_mu);
    *(cuuint64_t *)value = total;
    return CUDA_SUCCESS;
}

/* cuGraphAddNode (CUDA 12.2) and _v2 (12.3, with edge data): the generic form. CUgraphNodeParams
 * is the node type, 12 reserved bytes, then a union holding the type's parameters
 * (CUDA_MEM_ALLOC_NODE_PARAMS_v2 for CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10, the same layout as v1;
 * CUDA_MEM_FREE_NODE_PARAMS, the pointer, for CU_GRAPH_NODE_TYPE_MEM_FREE = 11;
 * CUDA_CHILD_GRAPH_NODE_PARAMS, the graph then its CUgraphChildGraphNodeOwnership, for
 * CU_GRAPH_NODE_TYPE_GRAPH = 4). The stand-in adds memory and child graph nodes this way only. */
typedef struct {
    int type;
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_KERNEL_NODE_PARAMS kernel; /* the leading fields of CUDA_KERNEL_NODE_PARAMS_v3 */
        si_mem_alloc_params alloc;
        CUdeviceptr free_dptr;
        struct {
            CUgraph graph;
            int ownership;
        } child;
    } u;
    long long reserved2;
} si_node_params;

enum { SI_CHILD_CLONE = 0, SI_CHILD_MOVE = 1 };

/* A child graph node (CUDA_CHILD_GRAPH_NODE_PARAMS, CUgraphChildGraphNodeOwnership): with
 * CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE the child is cloned into the node, "and memory
 * allocation/free nodes can't be present in the child graph"; with _MOVE "The child graph is
 * moved to the parent. The handle to the child graph is owned by the parent and will be destroyed
 * when the parent is destroyed", and it "Cannot be independently instantiated or destroyed;
 * Cannot be added as a child graph of a separate parent graph". "Graphs containing memory
 * allocation or memory free nodes must set the ownership to be moved to the parent." The child's
 * nodes run where the node is (copied into the parent's list, which runs in order). */
static CUresult add_child(CUgraphNode *node, CUgraph g, CUgraph child, int ownership) {
    int mem = 0;
    if (!node || !g || !child || child == g || child->owner || g->n + child->n > 64 ||
        (ownership != SI_CHILD_CLONE && ownership != SI_CHILD_MOVE))
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < child->n; i++)
        mem |= child->node[i].mem != 0;
    if (mem && ownership == SI_CHILD_CLONE)
        return CUDA_ERROR_INVALID_VALUE;
    *node = &g->node[g->n];
    memcpy(&g->node[g->n], child->node, (size_t)child->n * sizeof(child->node[0]));
    if (child->n)
        g->node[g->n].child = child->n;
    g->n += child->n;
    if (ownership == SI_CHILD_MOVE) {
        child->owner = g;
        child->next_owned = g->owned;
        g->owned = child;
    }
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult cuGraphAddNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                  size_t ndeps, si_node_params *p) {
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->type == 10)
        return cuGraphAddMemAllocNode(node, g, deps, ndeps, &p->u.alloc);
    if (p->type == 11)
        return cuGraphAddMemFreeNode(node, g, deps, ndeps, p->u.free_dptr);
    if (p->type == 4)
        return add_child(node, g, p->u.child.graph, p->u.child.ownership);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* cuGraphExecNodeSetParams (CUDA 12.2): "Update's a graph node's parameters in an instantiated
 * graph"; for a kernel node see cuGraphExecKernelNodeSetParams, for a child graph node "Topology
 * must match and restrictions apply recursively", and memory allocation and free nodes: "API
 * unsupported". The stand-in updates kernel (CU_GRAPH_NODE_TYPE_KERNEL = 0) and child graph nodes. */
SI_EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node, si_node_params *p) {
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->type == 0)
        return exec_kernel(exec, node, &p->u.kernel);
    if (p->type == 4)
        return cuGraphExecChildGraphNodeSetParams(exec, node, p->u.child.graph);
    return CUDA_ERROR_NOT_SUPPORTED;
}

SI_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                     const void *edges, size_t ndeps, si_node_params *p) {
    (void)edges;
    return cuGraphAddNode(node, g, deps, ndeps, p);
}
