/* An executable graph is charged by its own measurements (its handle is its signature: launches.c,
 * signature.c), but its work can change under the same handle, and a new executable graph can
 * get a destroyed one's address. CUDA Driver API reference, Graph Management: cuGraphExecUpdate
 * "Updates the node parameters in the instantiated graph specified by hGraphExec with the node
 * parameters in a topologically identical graph"; cuGraphExecKernelNodeSetParams ("All
 * nodeParams fields may change", the function and grid included), cuGraphExecNodeSetParams,
 * cuGraphExecChildGraphNodeSetParams, cuGraphExecMemsetNodeSetParams,
 * cuGraphExecMemcpyNodeSetParams, cuGraphExecHostNodeSetParams,
 * cuGraphExecEventRecordNodeSetEvent, cuGraphExecEventWaitNodeSetEvent,
 * cuGraphExecExternalSemaphoresSignalNodeSetParams, cuGraphExecExternalSemaphoresWaitNodeSetParams,
 * cuGraphExecBatchMemOpNodeSetParams and cuGraphNodeSetEnabled (which takes the executable graph)
 * change one node; each "only affect[s] future launches of hGraphExec". Since CUDA 12.0 the header
 * maps cuGraphExecUpdate and cuGraphExecKernelNodeSetParams to their `_v2` symbols (the result
 * information structure; the v2 kernel node parameters), and the driver still exports the
 * pre-12.0 ones: both are hooked. None has a per-thread-stream variant.
 *
 * After any of these calls (whatever it answered: a restart only forgoes de-noising) and after
 * cuGraphExecDestroy, the graph's measurement history starts afresh, and its launches in flight,
 * which run the old work, are charged their own measurements without joining it (signature.c).
 * None of this is on the launch path. Parameters are passed on untouched, so their types do not
 * matter here. */
#include "hooks.h"
#include "launch.h"
#include "signature.h"

typedef struct vgpu_graph_node *CUgraphNode;

static void restart(CUgraphExec exec)
{
    if (exec)
        vgpu_launch_restart(vgpu_graph_signature(exec));
}

typedef CUresult (*destroy_fn)(CUgraphExec);

VGPU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    destroy_fn real = REAL_CU(destroy_fn, cuGraphExecDestroy);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(exec);
    restart(exec);
    return rc;
}

typedef CUresult (*update_fn)(CUgraphExec, CUgraph, CUgraphNode *, void *);
typedef CUresult (*update_v2_fn)(CUgraphExec, CUgraph, void *);

/* The pre-12.0 form: the node that failed the update and a CUgraphExecUpdateResult. */
VGPU_EXPORT CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode *error_node,
                                       void *result)
{
    update_fn real = REAL_CU(update_fn, cuGraphExecUpdate);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(exec, graph, error_node, result);
    restart(exec);
    return rc;
}

/* The 12.0 form: a CUgraphExecUpdateResultInfo. */
VGPU_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, void *result_info)
{
    update_v2_fn real = REAL_CU(update_v2_fn, cuGraphExecUpdate_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(exec, graph, result_info);
    restart(exec);
    return rc;
}

/* (hGraphExec, hNode, one more argument): the node's new parameters, child graph, event or
 * enabled flag. */
#define VGPU_NODE_UPDATE(name, type)                                                              \
    VGPU_EXPORT CUresult name(CUgraphExec exec, CUgraphNode node, type arg)                       \
    {                                                                                             \
        typedef CUresult (*fn)(CUgraphExec, CUgraphNode, type);                                   \
        fn real = REAL_CU(fn, name);                                                              \
        if (!real)                                                                                \
            return CUDA_ERROR_NOT_INITIALIZED;                                                    \
        CUresult rc = real(exec, node, arg);                                                      \
        restart(exec);                                                                            \
        return rc;                                                                                \
    }

/* (hGraphExec, hNode, the node's new parameters, the context they are valid in). */
#define VGPU_NODE_UPDATE_IN(name)                                                                 \
    VGPU_EXPORT CUresult name(CUgraphExec exec, CUgraphNode node, const void *params,             \
                              CUcontext ctx)                                                      \
    {                                                                                             \
        typedef CUresult (*fn)(CUgraphExec, CUgraphNode, const void *, CUcontext);                \
        fn real = REAL_CU(fn, name);                                                              \
        if (!real)                                                                                \
            return CUDA_ERROR_NOT_INITIALIZED;                                                    \
        CUresult rc = real(exec, node, params, ctx);                                              \
        restart(exec);                                                                            \
        return rc;                                                                                \
    }

VGPU_NODE_UPDATE(cuGraphExecKernelNodeSetParams, const void *)    /* CUDA_KERNEL_NODE_PARAMS_v1 */
VGPU_NODE_UPDATE(cuGraphExecKernelNodeSetParams_v2, const void *) /* CUDA_KERNEL_NODE_PARAMS_v2 */
VGPU_NODE_UPDATE(cuGraphExecNodeSetParams, void *)                /* CUgraphNodeParams */
VGPU_NODE_UPDATE(cuGraphExecChildGraphNodeSetParams, CUgraph)
VGPU_NODE_UPDATE(cuGraphExecHostNodeSetParams, const void *)
VGPU_NODE_UPDATE(cuGraphExecEventRecordNodeSetEvent, CUevent)
VGPU_NODE_UPDATE(cuGraphExecEventWaitNodeSetEvent, CUevent)
VGPU_NODE_UPDATE(cuGraphExecExternalSemaphoresSignalNodeSetParams, const void *)
VGPU_NODE_UPDATE(cuGraphExecExternalSemaphoresWaitNodeSetParams, const void *)
VGPU_NODE_UPDATE(cuGraphExecBatchMemOpNodeSetParams, const void *)
VGPU_NODE_UPDATE(cuGraphNodeSetEnabled, unsigned)
VGPU_NODE_UPDATE_IN(cuGraphExecMemsetNodeSetParams) /* CUDA_MEMSET_NODE_PARAMS */
VGPU_NODE_UPDATE_IN(cuGraphExecMemcpyNodeSetParams) /* CUDA_MEMCPY3D */
