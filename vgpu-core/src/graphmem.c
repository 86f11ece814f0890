/* Graph memory nodes. CUDA Programming Guide, "Graph Memory Nodes": cuGraphAddMemAllocNode fixes
 * the allocation's address and its location (nodeParams->poolProps.location) when the node is
 * added; physical memory is attached when a launch reaches the node, outlives the graph ("Graph
 * destruction does not automatically free any live graph-allocated memory"), and once freed stays
 * cached for graphs on its device until cuDeviceGraphMemTrim. Launch, upload, instantiation and
 * executable-graph updates all lead to that memory, so the one sound point we see before any of
 * them is the node's creation: a node is charged its size on its location's device when added,
 * and refused (CUDA_ERROR_OUT_OF_MEMORY) when that does not fit, whatever launches later. The
 * charge stays while the graph lives (a graph with memory nodes has at most one executable
 * graph at a time and cannot be cloned or nested, per cuGraphInstantiate, cuGraphClone and
 * cuGraphAddChildGraphNode), then moves to the device's retained graph memory, which only falls
 * to what the driver reports (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) at cuDeviceGraphMemTrim or
 * before an allocation would be refused. A device is never charged less than the driver reports
 * for graphs, which also covers allocations captured from streams (not added through the hook)
 * from the next such point on. */
#include <pthread.h>

#include "account.h"
#include "allocs.h"
#include "graphmem.h"
#include "hooks.h"
#include "state.h"

typedef struct { /* CUDA_MEM_ALLOC_NODE_PARAMS (only the pool's location and the size are read) */
    CUmemPoolProps poolProps;
    const void *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;
} mem_alloc_node_params;

typedef CUresult (*add_fn)(void **, CUgraph, void *const *, size_t, mem_alloc_node_params *);
typedef CUresult (*graph_fn)(CUgraph);
typedef CUresult (*trim_fn)(CUdevice);
typedef CUresult (*attr_fn)(CUdevice, int, void *);

enum { GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2 };

typedef struct {
    CUgraph graph;
    uint64_t bytes[VGPU_MAX_DEVICES]; /* its allocation nodes, per limits index */
} graph_entry;

static graph_entry *graphs;
static size_t ngraphs, cap;
static uint64_t promised[VGPU_MAX_DEVICES]; /* nodes of live graphs */
static uint64_t retained[VGPU_MAX_DEVICES]; /* nodes of destroyed graphs, until trimmed */
static uint64_t charged[VGPU_MAX_DEVICES];  /* what the region holds for graph memory */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* What the driver reserves for graphs on limits index `index`, via the ordinal `dev`. */
static uint64_t reported(CUdevice dev)
{
    attr_fn real = REAL_CU(attr_fn, cuDeviceGetGraphMemAttribute);
    unsigned long long bytes = 0;
    if (!real || real(dev, GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &bytes) != CUDA_SUCCESS)
        return 0;
    return bytes;
}

/* Sets the device's charge to max(promised + retained, reported), retained first lowered to what
 * the driver reports when `trimmed` (under mu). */
static void settle(int index, CUdevice dev, int trimmed)
{
    uint64_t driver = reported(dev);
    if (trimmed && retained[index] > driver)
        retained[index] = driver;
    uint64_t now = promised[index] + retained[index];
    now = now > driver ? now : driver;
    if (now > charged[index])
        vgpu_force_reserve(index, now - charged[index]);
    else
        vgpu_unreserve(index, charged[index] - now);
    charged[index] = now;
}

void vgpu_graphmem_reconcile(void)
{
    const vgpu_state *s = vgpu_state_get();
    int index;
    pthread_mutex_lock(&mu);
    for (CUdevice dev = 0; s && dev < s->limits.count; dev++)
        if (vgpu_device_index(dev, &index) == CUDA_SUCCESS)
            settle(index, dev, 1);
    pthread_mutex_unlock(&mu);
}

void vgpu_graphmem_forget(void)
{
    ngraphs = 0;
    for (int i = 0; i < VGPU_MAX_DEVICES; i++)
        promised[i] = retained[i] = charged[i] = 0;
    pthread_mutex_init(&mu, NULL);
}

static graph_entry *entry(CUgraph graph, int create)
{
    for (size_t i = 0; i < ngraphs; i++)
        if (graphs[i].graph == graph)
            return &graphs[i];
    if (!create || vgpu_grow((void **)&graphs, &cap, ngraphs, sizeof *graphs) != 0)
        return NULL;
    graphs[ngraphs] = (graph_entry){.graph = graph};
    return &graphs[ngraphs++];
}

VGPU_EXPORT CUresult cuGraphAddMemAllocNode(void **node, CUgraph graph, void *const *deps,
                                            size_t ndeps, mem_alloc_node_params *params)
{
    add_fn real = REAL_CU(add_fn, cuGraphAddMemAllocNode);
    int index;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    if (!params || params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return real(node, graph, deps, ndeps, params);
    CUdevice dev = params->poolProps.location.id;
    uint64_t bytes = params->bytesize;
    CUresult rc = vgpu_device_index(dev, &index);
    if (rc == CUDA_SUCCESS)
        rc = vgpu_reserve(index, bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&mu);
    graph_entry *g = entry(graph, 1);
    rc = g ? real(node, graph, deps, ndeps, params) : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        g->bytes[index] += bytes;
        promised[index] += bytes;
        charged[index] += bytes; /* the reservation above */
        settle(index, dev, 0);
    }
    pthread_mutex_unlock(&mu);
    if (rc != CUDA_SUCCESS)
        vgpu_unreserve(index, bytes);
    return rc;
}

/* The graph's nodes move to their devices' retained graph memory (their allocations may be live,
 * or cached until trimmed). */
VGPU_EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
    graph_fn real = REAL_CU(graph_fn, cuGraphDestroy);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(graph);
    graph_entry *g = rc == CUDA_SUCCESS ? entry(graph, 0) : NULL;
    for (int i = 0; g && i < VGPU_MAX_DEVICES; i++) {
        promised[i] -= g->bytes[i];
        retained[i] += g->bytes[i];
    }
    if (g)
        *g = graphs[--ngraphs];
    pthread_mutex_unlock(&mu);
    return rc;
}

VGPU_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev)
{
    trim_fn real = REAL_CU(trim_fn, cuDeviceGraphMemTrim);
    int index;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_device_index(dev, &index);
    if (rc == CUDA_SUCCESS)
        rc = real(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&mu);
    settle(index, dev, 1);
    pthread_mutex_unlock(&mu);
    return rc;
}
