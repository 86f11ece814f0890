/* Graph memory nodes, added by cuGraphAddMemAllocNode or cuGraphAddNode(_v2) with a memory
 * allocation node's parameters. CUDA Programming Guide, "Graph Memory Nodes": the allocation's
 * address and location (nodeParams->poolProps.location) are fixed when the node is added;
 * physical memory is attached when a launch reaches the node, outlives the graph ("Graph
 * destruction does not automatically free any live graph-allocated memory"), and once freed stays
 * cached for graphs on its device until cuDeviceGraphMemTrim. Launch, upload, instantiation and
 * executable-graph updates all lead to that memory, so the one sound point we see before any of
 * them is the node's creation: a node is charged its size on its location's device when added,
 * and refused (CUDA_ERROR_OUT_OF_MEMORY) when that does not fit, whatever launches later. The
 * charge stays while the graph lives (cuGraphInstantiate: a graph with memory nodes has at most
 * one executable graph at a time), then moves to the device's retained graph memory, which only
 * falls to what the driver reports (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) at
 * cuDeviceGraphMemTrim or before an allocation would be refused. A device is never charged less
 * than the driver reports for graphs, which also covers memory nodes that reach a graph another
 * way (cloning, a graph launched as a child node) from the next such point on. A child graph
 * moved into its parent (cuGraphAddNode, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) keeps its nodes
 * counted while the parent lives and is retired with it, as the driver destroys it then.
 *
 * Stream capture adds memory nodes too: cuMemAllocAsync and cuMemAllocFromPoolAsync on a
 * capturing stream result "in the creation of an allocation node ... owned by the graph instead
 * of the memory pool. The memory pool's properties are used to set the node's creation
 * parameters" (CUDA Driver API reference, cuMemAllocAsync). memory.c charges such an allocation
 * here, at capture, on the pool's device, to the graph the stream captures into
 * (cuStreamGetCaptureInfo_v2), and refuses it past the grant like any other node; a capture
 * that ends invalidated destroys its graph, whose nodes are then retired as at cuGraphDestroy. */
#include <pthread.h>

#include "account.h"
#include "capture.h"
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

typedef struct { /* CUgraphNodeParams: a memory allocation node's and a child graph node's read */
    int type;
    int reserved0[3];
    union {
        long long reserved1[29];
        mem_alloc_node_params alloc;
        struct { /* CUDA_CHILD_GRAPH_NODE_PARAMS */
            CUgraph graph;
            int ownership; /* CUgraphChildGraphNodeOwnership */
        } child;
    };
    long long reserved2;
} node_params;

typedef CUresult (*add_fn)(void **, CUgraph, void *const *, size_t, mem_alloc_node_params *);
typedef CUresult (*add_node_fn)(void **, CUgraph, void *const *, size_t, node_params *);
typedef CUresult (*add_node2_fn)(void **, CUgraph, void *const *, const void *, size_t,
                                 node_params *);
typedef CUresult (*graph_fn)(CUgraph);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*trim_fn)(CUdevice);
typedef CUresult (*attr_fn)(CUdevice, int, void *);

enum { GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2, GRAPH_NODE_TYPE_MEM_ALLOC = 10 };
enum { GRAPH_NODE_TYPE_GRAPH = 4, CHILD_GRAPH_OWNERSHIP_MOVE = 1 };

typedef struct {
    CUgraph graph;
    CUgraph owner;                    /* the parent it was moved into, which destroys it; or NULL */
    unsigned long long capture;       /* while it is being captured: the sequence's id; else 0 */
    unsigned long long recapture;     /* while it is being recaptured: the sequence's id; else 0 */
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

__attribute__((constructor)) static void register_reclaimer(void)
{
    vgpu_account_reclaimer(vgpu_graphmem_reconcile);
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

CUresult vgpu_graphmem_begin(CUdevice dev, uint64_t bytes, int *index)
{
    CUresult rc = vgpu_device_index(dev, index);
    if (rc == CUDA_SUCCESS)
        rc = vgpu_reserve(*index, bytes);
    if (rc != CUDA_SUCCESS)
        *index = -1;
    return rc;
}

CUresult vgpu_graphmem_end(CUgraph graph, unsigned long long capture, int index, CUdevice dev,
                           uint64_t bytes, CUresult rc)
{
    if (index < 0)
        return rc;
    pthread_mutex_lock(&mu);
    int fresh = entry(graph, 0) == NULL; /* a capture into an existing graph does not own it */
    graph_entry *g = rc == CUDA_SUCCESS ? entry(graph, 1) : NULL;
    if (g) {
        g->capture = fresh ? capture : g->capture;
        g->bytes[index] += bytes;
        promised[index] += bytes;
        charged[index] += bytes; /* the reservation made in vgpu_graphmem_begin */
        settle(index, dev, 0);
    }
    pthread_mutex_unlock(&mu);
    if (!g)
        vgpu_unreserve(index, bytes); /* not added, or (out of host memory) not tracked */
    return rc;
}

/* The three ways to add a node, with their arguments (cuGraphAddNode_v2 adds edge data). */
enum { ADD_MEM_ALLOC, ADD_NODE, ADD_NODE_V2 };
typedef struct {
    void **node;
    CUgraph graph;
    void *const *deps;
    const void *edges;
    size_t ndeps;
    void *params;
} add_args;

static CUresult add_real(int how, const add_args *a)
{
    add_fn alloc = REAL_CU(add_fn, cuGraphAddMemAllocNode);
    add_node_fn node = REAL_CU(add_node_fn, cuGraphAddNode);
    add_node2_fn node2 = REAL_CU(add_node2_fn, cuGraphAddNode_v2);
    if (how == ADD_MEM_ALLOC && alloc)
        return alloc(a->node, a->graph, a->deps, a->ndeps, a->params);
    if (how == ADD_NODE && node)
        return node(a->node, a->graph, a->deps, a->ndeps, a->params);
    if (how == ADD_NODE_V2 && node2)
        return node2(a->node, a->graph, a->deps, a->edges, a->ndeps, a->params);
    return CUDA_ERROR_NOT_INITIALIZED;
}

/* A child graph moved into its parent (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE, the only way a graph
 * with memory nodes becomes a child: CUDA_CHILD_GRAPH_NODE_PARAMS) "is owned by the parent and
 * will be destroyed when the parent is destroyed" and "Cannot be independently ... destroyed", so
 * the program never names it to cuGraphDestroy: it is retired with its parent (retire_tree). */
static void moved(const add_args *a, const node_params *p, CUresult rc)
{
    if (rc != CUDA_SUCCESS || !p || p->type != GRAPH_NODE_TYPE_GRAPH ||
        p->child.ownership != CHILD_GRAPH_OWNERSHIP_MOVE || !p->child.graph)
        return;
    pthread_mutex_lock(&mu);
    graph_entry *g = entry(p->child.graph, 1); /* its own descendants may hold memory nodes */
    if (g)
        g->owner = a->graph;
    pthread_mutex_unlock(&mu);
}

/* A node is charged its size on its location's device before the driver adds it; a host
 * location is not device memory and passes uncounted. */
static CUresult add(int how, const add_args *a, const mem_alloc_node_params *alloc)
{
    int index = -1;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    CUdevice dev = 0;
    int counted = alloc && vgpu_location_device(alloc->poolProps.location, &dev);
    CUresult rc = counted ? vgpu_graphmem_begin(dev, alloc->bytesize, &index) : CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = add_real(how, a);
    if (how != ADD_MEM_ALLOC)
        moved(a, a->params, rc);
    return vgpu_graphmem_end(a->graph, 0, index, dev, counted ? alloc->bytesize : 0, rc);
}

VGPU_EXPORT CUresult cuGraphAddMemAllocNode(void **node, CUgraph graph, void *const *deps,
                                            size_t ndeps, mem_alloc_node_params *params)
{
    add_args a = {node, graph, deps, NULL, ndeps, params};
    return add(ADD_MEM_ALLOC, &a, params);
}

/* cuGraphAddNode (CUDA 12.2) and _v2 (12.3) add any node type; CUgraphNodeParams is the type,
 * 12 reserved bytes, then the type's parameters: CUDA_MEM_ALLOC_NODE_PARAMS_v2 (the v1 layout)
 * for CU_GRAPH_NODE_TYPE_MEM_ALLOC. */
static const mem_alloc_node_params *alloc_params(const node_params *p)
{
    return p && p->type == GRAPH_NODE_TYPE_MEM_ALLOC ? &p->alloc : NULL;
}

VGPU_EXPORT CUresult cuGraphAddNode(void **node, CUgraph graph, void *const *deps, size_t ndeps,
                                    node_params *params)
{
    add_args a = {node, graph, deps, NULL, ndeps, params};
    return add(ADD_NODE, &a, alloc_params(params));
}

VGPU_EXPORT CUresult cuGraphAddNode_v2(void **node, CUgraph graph, void *const *deps,
                                       const void *edges, size_t ndeps, node_params *params)
{
    add_args a = {node, graph, deps, edges, ndeps, params};
    return add(ADD_NODE_V2, &a, alloc_params(params));
}

/* Under mu: a graph's nodes move to their devices' retained graph memory (their allocations may
 * be live, or cached until trimmed). */
static void retire(graph_entry *g)
{
    for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
        promised[i] -= g->bytes[i];
        retained[i] += g->bytes[i];
    }
    *g = graphs[--ngraphs];
}

/* Under mu: retires `graph` and, first, every child graph moved into it (and theirs). */
static void retire_tree(CUgraph graph)
{
    for (size_t i = 0; i < ngraphs; i++)
        if (graphs[i].owner == graph) {
            graphs[i].owner = NULL; /* never followed twice, whatever handles were reused */
            retire_tree(graphs[i].graph); /* removes that entry: look again from the start */
            i = (size_t)-1;
        }
    graph_entry *g = entry(graph, 0);
    if (g)
        retire(g);
}

/* cuStreamEndCapture hands the captured graph over, or (an invalidated capture) destroys it and
 * returns none: then its nodes are retired as at cuGraphDestroy. `query` is the stream whose
 * capture is asked about: the per-thread variant's NULL stream is the calling thread's
 * (CU_STREAM_PER_THREAD, "an implicit stream with per-thread synchronization behavior"). */
static CUresult end_capture(end_fn real, CUstream stream, CUstream query, CUgraph *graph)
{
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    unsigned long long capture = vgpu_capture_id(query);
    CUresult rc = real(stream, graph);
    pthread_mutex_lock(&mu);
    for (size_t i = ngraphs; capture && i-- > 0;) {
        if (graphs[i].recapture == capture)
            graphs[i].recapture = 0; /* kept, failed or not: the program destroys it */
        if (graphs[i].capture != capture)
            continue;
        if (rc == CUDA_SUCCESS && graph && *graph == graphs[i].graph) {
            graphs[i].capture = 0;
        } else {
            retire_tree(graphs[i].graph);
            i = ngraphs; /* entries moved: look again from the end */
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

VGPU_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph)
{
    return end_capture(REAL_CU(end_fn, cuStreamEndCapture), stream, stream, graph);
}

/* What programs built for the per-thread default stream (nvcc --default-stream per-thread,
 * CUDA_API_PER_THREAD_DEFAULT_STREAM) call, and cuGetProcAddress hands out for
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. */
VGPU_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph *graph)
{
    CUstream query = stream ? stream : (CUstream)0x2; /* CU_STREAM_PER_THREAD */
    return end_capture(REAL_CU(end_fn, cuStreamEndCapture_ptsz), stream, query, graph);
}

/* CUDA 13, cuStreamBeginRecaptureToGraph: "Begin graph capture on hStream to the existing hGraph.
 * The node creation order while recapturing the graph must be identical to the original graph",
 * and the recapture "will fail immediately for ... Parameter mismatches for memory allocation or
 * free nodes". A stream-ordered allocation recaptured redoes one of the graph's own memory nodes,
 * charged already (vgpu_graphmem_recaptured): the graph holds no more memory than before. */
typedef CUresult (*recapture_fn)(CUstream, int, CUgraph, void *, void *);

VGPU_EXPORT CUresult cuStreamBeginRecaptureToGraph(CUstream stream, int mode, CUgraph graph,
                                                   void *callback, void *user)
{
    recapture_fn real = REAL_CU(recapture_fn, cuStreamBeginRecaptureToGraph);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    CUresult rc = real(stream, mode, graph, callback, user);
    unsigned long long capture = rc == CUDA_SUCCESS ? vgpu_capture_id(stream) : 0;
    pthread_mutex_lock(&mu);
    graph_entry *g = capture ? entry(graph, 0) : NULL; /* none: it has no memory node to redo */
    if (g)
        g->recapture = capture;
    pthread_mutex_unlock(&mu);
    return rc;
}

int vgpu_graphmem_recaptured(CUgraph graph, unsigned long long capture)
{
    pthread_mutex_lock(&mu);
    graph_entry *g = entry(graph, 0);
    int redone = g && capture && g->recapture == capture;
    pthread_mutex_unlock(&mu);
    return redone;
}

VGPU_EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
    graph_fn real = REAL_CU(graph_fn, cuGraphDestroy);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&mu);
    CUresult rc = real(graph);
    if (rc == CUDA_SUCCESS)
        retire_tree(graph);
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
