/* A driver-API program for the memory tests: the allocation patterns where memory outlives the
 * call that obtained it (VMM mappings, pools that keep freed memory, graph memory nodes), pools
 * used from another GPU's context, the 32-bit v1 entry points, and a library opened with
 * RTLD_DEEPBIND. Prototypes in cudrv.h (from NVIDIA's public Driver API reference); linked
 * against libcuda.so.1 by name. Each result is printed as "NAME CODE" or "NAME BYTES".
 *
 *   memload vmm DEV BYTES COUNT          create, map, release at once (NVIDIA's VMM sample);
 *                                        then free on DEV while mapped and after unmapping
 *   memload vmmops DEV OP...             OP: c/m/u/r/t and a slot 0-7: create (slot+1) x 2 MiB,
 *                                        map once more, unmap the latest mapping, release,
 *                                        retain by address; prints "op RC FREE" after each
 *   memload pool POOLDEV CTXDEV BYTES COUNT [hold]  allocate from a pool on POOLDEV in CTXDEV's
 *                                        context (hold: then print "done" and wait)
 *   memload kept DEV BYTES THRESHOLD FREE  a pool with that release threshold: allocate, free
 *                                        (FREE: async, cuMemFreeAsync; sync, cuMemFree),
 *                                        synchronize, then cuMemAlloc, trim, cuMemAlloc
 *   memload graph DEV BYTES COUNT        a graph of COUNT memory-allocation nodes, launched
 *   memload graphnode DEV BYTES COUNT    the same nodes added with cuGraphAddNode
 *   memload childmove DEV BYTES COUNT OTHER  COUNT times: a child graph with an allocation node
 *                                        of BYTES ("add RC") and its free node, moved into a new
 *                                        parent graph (cuGraphAddNode, "child RC"), cuMemAlloc
 *                                        OTHER while the parent lives ("other RC"), then the
 *                                        parent destroyed ("destroy RC"), which destroys the child
 *   memload graphlife DEV BYTES OTHER    one node: launch, free, destroy the graph; then
 *                                        cuMemAlloc OTHER, cuDeviceGraphMemTrim, cuMemAlloc OTHER
 *   memload asyncdev SDEV CDEV BYTES COUNT  cuMemAllocAsync COUNT times on a stream of SDEV while
 *                                        CDEV's context is current
 *   memload capture SDEV CDEV BYTES COUNT HOW OTHER  the same inside a global-mode capture (graph
 *                                        memory nodes); HOW: launch (end, launch the graph) or
 *                                        invalid (synchronize the stream, which invalidates the
 *                                        capture, then end), or ptds (capture on the per-thread
 *                                        default stream, allocating with cuMemAllocAsync_ptsz
 *                                        on its NULL stream; end, launch); then cuMemAlloc OTHER
 *                                        on SDEV
 *   memload share DEV BYTES              a VMM allocation exported as a POSIX file descriptor,
 *                                        imported and mapped by a second memload process
 *                                        ("import DEV FD BYTES"), then released by both
 *   memload handover DEV BYTES OTHER     the same, but the importer ("hold DEV FD BYTES RFD WFD")
 *                                        keeps it mapped while this process unmaps and releases
 *                                        its own; then cuMemAlloc OTHER here, and again once the
 *                                        importer let go
 *   memload localized DEV BYTES          BYTES in locality domain 1 of DEV (CUDA 13.4's
 *                                        CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN): a VMM
 *                                        allocation, mapped; a pool's allocation; a graph node
 *   memload offdevice DEV BYTES          CUDA 13.0's pools off any device: BYTES from the host's
 *                                        default pinned pool, then cuMemAlloc BYTES on DEV; BYTES
 *                                        from a managed pool with no preferred location
 *   memload recapture DEV BYTES TIMES    capture cuMemAllocAsync BYTES and its cuMemFreeAsync on
 *                                        a stream of DEV; recapture the graph TIMES times
 *                                        (cuStreamBeginRecaptureToGraph), the same two calls
 *   memload v1 BYTES                     cuMemAlloc (32-bit ABI), directly and by
 *                                        cuGetProcAddress at version 3000
 *   memload deepbind LIB BYTES COUNT     LIB opened with RTLD_DEEPBIND allocates COUNT times */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cudrv.h"

CUresult cuMemAlloc(unsigned *, unsigned); /* the 32-bit ABI of CUDA 3.0, refused */

static int vmm(int dev, size_t bytes, int count)
{
    CUdeviceptr va[64];
    int mapped = 0;
    use_device(dev);
    for (int i = 0; i < count && i < 64; i++) {
        AllocProp prop = {1, 0, {1, dev}, NULL, {0}}; /* pinned, on device DEV */
        AccessDesc access = {{1, dev}, 3};            /* read-write */
        Handle h;
        CUresult rc = cuMemCreate(&h, bytes, &prop, 0);
        printf("rc %d\n", rc);
        if (rc)
            continue;
        if (cuMemAddressReserve(&va[mapped], bytes, 0, 0, 0) || cuMemMap(va[mapped], bytes, 0, h, 0) ||
            cuMemSetAccess(va[mapped], bytes, &access, 1) || cuMemRelease(h)) {
            printf("error vmm\n");
            return 3;
        }
        mapped++;
    }
    print_free("free_mapped", dev);
    for (int i = 0; i < mapped; i++)
        printf("unmap %d\n", cuMemUnmap(va[i], bytes));
    print_free("free_unmapped", dev);
    return 0;
}

static int vmm_ops(int dev, int n, char **ops)
{
    Handle h[8] = {0};
    CUdeviceptr va[8][8];
    int mapped[8] = {0};
    use_device(dev);
    for (int k = 0; k < n; k++) {
        int i = (ops[k][1] - '0') & 7;
        size_t bytes = (size_t)(i + 1) << 21;
        AllocProp prop = {1, 0, {1, dev}, NULL, {0}};
        AccessDesc access = {{1, dev}, 3};
        CUresult rc = 1;
        Handle again = 0;
        switch (ops[k][0]) {
        case 'c': rc = cuMemCreate(&h[i], bytes, &prop, 0); break;
        case 'm':
            if (mapped[i] == 8 || cuMemAddressReserve(&va[i][mapped[i]], bytes, 0, 0, 0))
                break;
            rc = cuMemMap(va[i][mapped[i]], bytes, 0, h[i], 0);
            if (rc == 0)
                rc = cuMemSetAccess(va[i][mapped[i]++], bytes, &access, 1);
            break;
        case 'u': rc = mapped[i] ? cuMemUnmap(va[i][--mapped[i]], bytes) : 1; break;
        case 'r': rc = cuMemRelease(h[i]); break;
        case 't':
            rc = mapped[i] ? cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)va[i][0]) : 1;
            rc = rc ? rc : again != h[i];
            break;
        }
        size_t free_b = 0, total = 0;
        cuMemGetInfo_v2(&free_b, &total);
        printf("op %d %zu\n", rc, free_b);
    }
    return 0;
}

static CUmemoryPool pool_on(int dev)
{
    PoolProps props;
    CUmemoryPool pool;
    memset(&props, 0, sizeof props);
    props.alloc_type = 1;
    props.location = (Location){1, dev};
    check(cuMemPoolCreate(&pool, &props), "cuMemPoolCreate");
    return pool;
}

static int pool(int pool_dev, int ctx_dev, size_t bytes, int count, int hold)
{
    use_device(pool_dev);
    CUmemoryPool p = pool_on(pool_dev);
    use_device(ctx_dev);
    for (int i = 0; i < count; i++) {
        CUdeviceptr d;
        printf("rc %d\n", cuMemAllocFromPoolAsync(&d, bytes, p, NULL));
    }
    print_free("free0", 0);
    print_free("free1", 1);
    printf("done\n");
    while (hold)
        pause();
    return 0;
}

/* A pool keeps freed memory up to its release threshold until it is trimmed. */
static int kept(int dev, size_t bytes, uint64_t threshold, int async)
{
    CUdeviceptr d, other;
    use_device(dev);
    CUmemoryPool p = pool_on(dev);
    printf("threshold %d\n", cuMemPoolSetAttribute(p, 4, &threshold)); /* RELEASE_THRESHOLD */
    printf("alloc %d\n", cuMemAllocFromPoolAsync(&d, bytes, p, NULL));
    printf("free %d\n", async ? cuMemFreeAsync(d, NULL) : cuMemFree_v2(d));
    printf("sync %d\n", cuCtxSynchronize());
    printf("rc_kept %d\n", cuMemAlloc_v2(&other, bytes));
    printf("trim %d\n", cuMemPoolTrimTo(p, 0));
    printf("rc_trimmed %d\n", cuMemAlloc_v2(&other, bytes));
    return 0;
}

static int graph(int dev, size_t bytes, int count, int generic)
{
    CUgraph g;
    CUgraphExec exec;
    use_device(dev);
    if (cuGraphCreate(&g, 0))
        return 3;
    for (int i = 0; i < count; i++) {
        AllocNodeParams params;
        CUgraphNode node;
        memset(&params, 0, sizeof params);
        params.pool_props.alloc_type = 1;
        params.pool_props.location = (Location){1, dev};
        params.bytesize = bytes;
        NodeParams any;
        memset(&any, 0, sizeof any);
        any.type = 10; /* CU_GRAPH_NODE_TYPE_MEM_ALLOC */
        any.u.alloc = params;
        printf("add %d\n", generic ? cuGraphAddNode(&node, g, NULL, 0, &any)
                                    : cuGraphAddMemAllocNode(&node, g, NULL, 0, &params));
    }
    CUresult rc = cuGraphInstantiateWithFlags(&exec, g, 0);
    printf("instantiate %d\n", rc);
    printf("launch %d\n", rc ? rc : cuGraphLaunch(exec, NULL));
    return 0;
}

/* A child graph with memory nodes moved into its parent (CUDA_CHILD_GRAPH_NODE_PARAMS with
 * CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE): "owned by the parent and will be destroyed when the parent
 * is destroyed". Never launched, so the driver never backs its allocation. */
static int child_move(int dev, size_t bytes, int count, size_t other)
{
    use_device(dev);
    for (int i = 0; i < count; i++) {
        CUgraph child, parent;
        CUgraphNode node;
        CUdeviceptr d;
        NodeParams any;
        if (cuGraphCreate(&child, 0) || cuGraphCreate(&parent, 0))
            return 3;
        memset(&any, 0, sizeof any);
        any.type = 10; /* CU_GRAPH_NODE_TYPE_MEM_ALLOC */
        any.u.alloc.pool_props.alloc_type = 1;
        any.u.alloc.pool_props.location = (Location){1, dev};
        any.u.alloc.bytesize = bytes;
        CUresult rc = cuGraphAddNode(&node, child, NULL, 0, &any);
        printf("add %d\n", rc);
        if (rc)
            return 0;
        CUgraphNode alloc = node;
        CUdeviceptr dptr = any.u.alloc.dptr;
        memset(&any, 0, sizeof any);
        any.type = 11; /* CU_GRAPH_NODE_TYPE_MEM_FREE */
        any.u.free_dptr = dptr;
        check(cuGraphAddNode(&node, child, &alloc, 1, &any), "cuGraphAddNode free");
        memset(&any, 0, sizeof any);
        any.type = 4; /* CU_GRAPH_NODE_TYPE_GRAPH */
        any.u.child.graph = child;
        any.u.child.ownership = 1; /* CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE */
        printf("child %d\n", cuGraphAddNode(&node, parent, NULL, 0, &any));
        rc = cuMemAlloc_v2(&d, other);
        printf("other %d\n", rc);
        if (!rc)
            cuMemFree_v2(d);
        printf("destroy %d\n", cuGraphDestroy(parent));
    }
    return 0;
}

/* Graph memory outlives its graph: cached for graphs until cuDeviceGraphMemTrim. */
static int graph_life(int dev, size_t bytes, size_t other)
{
    CUgraph g;
    CUgraphExec exec;
    CUgraphNode node;
    AllocNodeParams params;
    CUdeviceptr d;
    use_device(dev);
    memset(&params, 0, sizeof params);
    params.pool_props.alloc_type = 1;
    params.pool_props.location = (Location){1, dev};
    params.bytesize = bytes;
    if (cuGraphCreate(&g, 0))
        return 3;
    printf("add %d\n", cuGraphAddMemAllocNode(&node, g, NULL, 0, &params));
    printf("instantiate %d\n", cuGraphInstantiateWithFlags(&exec, g, 0));
    printf("launch %d\n", cuGraphLaunch(exec, NULL));
    printf("free %d\n", cuMemFreeAsync(params.dptr, NULL));
    printf("destroy %d\n", cuGraphExecDestroy(exec) || cuGraphDestroy(g));
    printf("rc_cached %d\n", cuMemAlloc_v2(&d, other));
    printf("trim %d\n", cuDeviceGraphMemTrim(dev));
    printf("rc_trimmed %d\n", cuMemAlloc_v2(&d, other));
    return 0;
}

/* COUNT cuMemAllocAsync of BYTES on a stream of STREAMDEV while CTXDEV's context is current. */
static int async_dev(int stream_dev, int ctx_dev, size_t bytes, int count)
{
    CUstream s;
    use_device(stream_dev);
    if (cuStreamCreate(&s, 0))
        return 3;
    use_device(ctx_dev);
    for (int i = 0; i < count; i++) {
        CUdeviceptr d;
        printf("rc %d\n", cuMemAllocAsync(&d, bytes, s));
    }
    print_free("free0", 0);
    print_free("free1", 1);
    return 0;
}

/* A global-mode capture on a stream of STREAMDEV (CTXDEV current) of COUNT cuMemAllocAsync of
 * BYTES (each becomes a graph memory node); then, as HOW says: "launch" ends the capture,
 * launches the graph and synchronizes; "invalid" synchronizes the capturing stream (which
 * invalidates the capture) and ends it ("invalid-ptsz": with cuStreamEndCapture_ptsz); "ptds"
 * captures on the per-thread default stream instead, as a program built with
 * --default-stream per-thread does (its entry points are the _ptsz ones, whose NULL stream is
 * CU_STREAM_PER_THREAD), then ends and launches; then cuMemAlloc_v2 OTHER on STREAMDEV. */
static int capture(int stream_dev, int ctx_dev, size_t bytes, int count, const char *how,
                   size_t other)
{
    CUstream s;
    CUgraph g = NULL;
    CUgraphExec exec;
    CUdeviceptr d;
    int ptds = !strcmp(how, "ptds");
    use_device(stream_dev);
    if (cuStreamCreate(&s, 0))
        return 3;
    CUstream captured = ptds ? NULL : s; /* the _ptsz calls' NULL stream: CU_STREAM_PER_THREAD */
    if (cuStreamBeginCapture_v2(ptds ? (CUstream)0x2 : s, 0)) /* CU_STREAM_CAPTURE_MODE_GLOBAL */
        return 3;
    if (!ptds)
        use_device(ctx_dev);
    for (int i = 0; i < count; i++)
        printf("rc %d\n", ptds ? cuMemAllocAsync_ptsz(&d, bytes, captured)
                               : cuMemAllocAsync(&d, bytes, captured));
    print_free("free_captured", stream_dev);
    int ptsz = !strcmp(how, "invalid-ptsz") || ptds; /* ended by the per-thread-stream variant */
    if (!strcmp(how, "invalid") || !strcmp(how, "invalid-ptsz"))
        printf("sync %d\n", cuStreamSynchronize(s));
    CUresult rc = ptsz ? cuStreamEndCapture_ptsz(captured, &g) : cuStreamEndCapture(s, &g);
    printf("end %d\n", rc);
    if (!rc && (!strcmp(how, "launch") || ptds)) {
        rc = cuGraphInstantiateWithFlags(&exec, g, 0);
        printf("launch %d\n", rc ? rc : cuGraphLaunch(exec, s) || cuStreamSynchronize(s));
        print_free("free_launched", stream_dev);
    }
    use_device(stream_dev);
    printf("other %d\n", cuMemAlloc_v2(&d, other));
    return 0;
}

/* BYTES of device memory in a locality domain of DEV, "a portion of device memory, specified by
 * the locality domain ID" (CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN, 6): CUmemLocation's id is
 * then its `localized` member, the device ordinal in its first byte and the domain in its second.
 * Allocated three ways (cuMemCreate and mapped, cuMemPoolCreate and cuMemAllocFromPoolAsync, a
 * graph allocation node), printing the free memory after each. */
static int localized(int dev, size_t bytes)
{
    unsigned char where[sizeof(int)] = {(unsigned char)dev, 1, 0, 0}; /* domain 1 of DEV */
    Location domain = {6, 0};
    memcpy(&domain.id, where, sizeof where);
    AllocProp prop = {PINNED, 0, domain, NULL, {0}};
    PoolProps pool_props;
    AllocNodeParams node_params;
    CUmemoryPool pool;
    Handle h;
    CUdeviceptr va, d;
    CUgraph g;
    CUgraphNode node;
    use_device(dev);
    CUresult rc = cuMemCreate(&h, bytes, &prop, 0);
    printf("vmm %d\n", rc ? rc : map_at(dev, h, bytes, &va));
    print_free("free_vmm", dev);
    memset(&pool_props, 0, sizeof pool_props);
    pool_props.alloc_type = PINNED;
    pool_props.location = domain;
    rc = cuMemPoolCreate(&pool, &pool_props);
    printf("pool %d\n", rc ? rc : cuMemAllocFromPoolAsync(&d, bytes, pool, NULL));
    print_free("free_pool", dev);
    memset(&node_params, 0, sizeof node_params);
    node_params.pool_props = pool_props;
    node_params.bytesize = bytes;
    rc = cuGraphCreate(&g, 0);
    printf("node %d\n", rc ? rc : cuGraphAddMemAllocNode(&node, g, NULL, 0, &node_params));
    print_free("free_node", dev);
    return 0;
}

/* CUDA 13.0's stream-ordered pools off any device (cuMemGetDefaultMemPool; cuMemPoolCreate with
 * CU_MEM_ALLOCATION_TYPE_MANAGED, 2, and CU_MEM_LOCATION_TYPE_NONE, 0: "no preferred location
 * for the managed memory pool"): BYTES of pinned host memory from the host's default pool
 * (CU_MEM_LOCATION_TYPE_HOST, 2), then cuMemAlloc_v2 BYTES on DEV; then BYTES of managed memory,
 * which the GPU pages in when it touches them. */
static int off_device(int dev, size_t bytes)
{
    Location host = {2, 0};
    PoolProps managed;
    CUmemoryPool pool;
    CUdeviceptr d;
    use_device(dev);
    CUresult rc = cuMemGetDefaultMemPool(&pool, &host, PINNED);
    printf("host %d\n", rc ? rc : cuMemAllocFromPoolAsync(&d, bytes, pool, NULL));
    print_free("free_host", dev);
    try_alloc("device", bytes);
    memset(&managed, 0, sizeof managed);
    managed.alloc_type = 2; /* CU_MEM_ALLOCATION_TYPE_MANAGED, location NONE */
    rc = cuMemPoolCreate(&pool, &managed);
    printf("managed %d\n", rc ? rc : cuMemAllocFromPoolAsync(&d, bytes, pool, NULL));
    print_free("free_managed", dev);
    return 0;
}

/* A graph with a memory allocation node and its free node, captured once, then recaptured TIMES
 * times (CUDA 13, cuStreamBeginRecaptureToGraph: "The node creation order while recapturing the
 * graph must be identical to the original graph"; allocation and free nodes must match their
 * parameters), as a program updating a captured graph in place does. */
static int recapture(int dev, size_t bytes, int times)
{
    CUstream s;
    CUgraph g, got;
    CUdeviceptr d;
    use_device(dev);
    if (cuStreamCreate(&s, 0) || cuStreamBeginCapture_v2(s, 0))
        return 3;
    printf("alloc %d\n", cuMemAllocAsync(&d, bytes, s));
    printf("release %d\n", cuMemFreeAsync(d, s));
    printf("end %d\n", cuStreamEndCapture(s, &g));
    print_free("free_captured", dev);
    for (int i = 0; i < times; i++) {
        printf("recapture %d\n", cuStreamBeginRecaptureToGraph(s, 0, g, NULL, NULL));
        printf("alloc %d\n", cuMemAllocAsync(&d, bytes, s));
        printf("release %d\n", cuMemFreeAsync(d, s));
        CUresult rc = cuStreamEndCapture(s, &got);
        printf("end %d\n", rc ? rc : got != g);
    }
    print_free("free_recaptured", dev);
    return 0;
}

/* An allocation shared with another process as NVIDIA documents it: created with a POSIX file
 * descriptor as its shareable type, mapped, exported; a fresh memload ("import") receives the
 * descriptor (inherited across exec) and imports, maps, unmaps and releases it; then this
 * process closes the descriptor, unmaps and releases its own. */
static int share(int dev, size_t bytes)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, dev}, NULL, {0}};
    Handle h;
    CUdeviceptr va;
    int fd = -1;
    char fd_arg[16], dev_arg[16], bytes_arg[32];
    use_device(dev);
    check(cuMemCreate(&h, bytes, &prop, 0), "cuMemCreate");
    check(map_at(dev, h, bytes, &va), "map");
    printf("export %d\n", cuMemExportToShareableHandle(&fd, h, POSIX_FD, 0));
    print_free("free_exporter", dev);
    snprintf(fd_arg, sizeof fd_arg, "%d", fd);
    snprintf(dev_arg, sizeof dev_arg, "%d", dev);
    snprintf(bytes_arg, sizeof bytes_arg, "%zu", bytes);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "memload", "import", dev_arg, fd_arg, bytes_arg, (char *)NULL);
        _exit(4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("importer %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    close(fd); /* the descriptor is a reference of its own (cuMemRelease): not kept */
    print_free("free_imported_gone", dev);
    printf("unmap %d\n", cuMemUnmap(va, bytes));
    printf("release %d\n", cuMemRelease(h));
    print_free("free_released", dev);
    return 0;
}

static int import(int dev, int fd, size_t bytes)
{
    Handle h;
    CUdeviceptr va;
    use_device(dev);
    CUresult rc = cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, POSIX_FD);
    printf("import %d\n", rc);
    if (rc)
        return 0;
    printf("map %d\n", map_at(dev, h, bytes, &va));
    print_free("free_importer", dev);
    printf("unmap %d\n", cuMemUnmap(va, bytes));
    printf("release %d\n", cuMemRelease(h));
    return 0;
}

/* The importer of `handover`: imports and maps, says so on `wfd`, waits for a byte on `rfd`,
 * then unmaps and releases. */
static int hold(int dev, int fd, size_t bytes, int rfd, int wfd)
{
    Handle h;
    CUdeviceptr va;
    char go = 0;
    use_device(dev);
    CUresult rc = cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, POSIX_FD);
    printf("import %d\n", rc);
    printf("map %d\n", rc ? rc : map_at(dev, h, bytes, &va));
    close(fd);
    if (write(wfd, "m", 1) != 1 || read(rfd, &go, 1) != 1 || rc)
        return 0;
    printf("unmap %d\n", cuMemUnmap(va, bytes));
    printf("release %d\n", cuMemRelease(h));
    return 0;
}

/* NVIDIA's documented lifetime of shared memory (cuMemRelease: freed when every mapping is
 * unmapped and every reference, "including its shareable counterparts", is released; "each time
 * a recipient process imports a shareable handle, it needs to pair it with cuMemRelease"): the
 * exporter lets go first, the importer still holds the memory. */
static int handover(int dev, size_t bytes, size_t other)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, dev}, NULL, {0}};
    Handle h;
    CUdeviceptr va;
    int fd = -1, to_child[2], from_child[2];
    char got = 0;
    use_device(dev);
    check(cuMemCreate(&h, bytes, &prop, 0), "cuMemCreate");
    check(map_at(dev, h, bytes, &va), "map");
    check(cuMemExportToShareableHandle(&fd, h, POSIX_FD, 0), "export");
    pid_t pid = spawn_importer("memload", "hold", dev, fd, bytes, to_child, from_child);
    if (pid < 0)
        return 3;
    close(fd);
    if (read(from_child[0], &got, 1) != 1)
        return 3;
    printf("unmap %d\n", cuMemUnmap(va, bytes));
    printf("release %d\n", cuMemRelease(h));
    print_free("free_handed_over", dev);
    try_alloc("other", other);
    if (write(to_child[1], "g", 1) != 1)
        return 3;
    int status = 0;
    waitpid(pid, &status, 0);
    printf("importer %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    print_free("free_let_go", dev);
    try_alloc("other_after", other);
    return 0;
}

static int v1(unsigned bytes)
{
    typedef CUresult (*v1_fn)(unsigned *, unsigned);
    unsigned d;
    void *fn = NULL;
    use_device(0);
    printf("direct %d\n", cuMemAlloc(&d, bytes));
    CUresult rc = cuGetProcAddress("cuMemAlloc", &fn, 3000, 0);
    printf("proc %d\n", rc ? rc : ((v1_fn)fn)(&d, bytes));
    return 0;
}

static int deepbind(const char *lib, size_t bytes, int count)
{
    use_device(0);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    CUresult (*alloc)(size_t) = h ? (CUresult(*)(size_t))dlsym(h, "memlib_alloc") : NULL;
    if (!alloc) {
        printf("error dlopen %s\n", dlerror());
        return 3;
    }
    for (int i = 0; i < count; i++)
        printf("rc %d\n", alloc(bytes));
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3 || cuInit(0))
        return 2;
    const char *cmd = argv[1];
    if (!strcmp(cmd, "vmm") && argc == 5)
        return vmm(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(cmd, "vmmops"))
        return vmm_ops(atoi(argv[2]), argc - 3, argv + 3);
    if (!strcmp(cmd, "pool") && (argc == 6 || argc == 7))
        return pool(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]),
                    argc == 7);
    if (!strcmp(cmd, "kept") && argc == 6)
        return kept(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10),
                    !strcmp(argv[5], "async"));
    if ((!strcmp(cmd, "graph") || !strcmp(cmd, "graphnode")) && argc == 5)
        return graph(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]),
                     !strcmp(cmd, "graphnode"));
    if (!strcmp(cmd, "childmove") && argc == 6)
        return child_move(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]),
                          strtoull(argv[5], NULL, 10));
    if (!strcmp(cmd, "graphlife") && argc == 5)
        return graph_life(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    if (!strcmp(cmd, "asyncdev") && argc == 6)
        return async_dev(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]));
    if (!strcmp(cmd, "capture") && argc == 8)
        return capture(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]),
                       argv[6], strtoull(argv[7], NULL, 10));
    if (!strcmp(cmd, "share") && argc == 4)
        return share(atoi(argv[2]), strtoull(argv[3], NULL, 10));
    if (!strcmp(cmd, "import") && argc == 5)
        return import(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 10));
    if (!strcmp(cmd, "handover") && argc == 5)
        return handover(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    if (!strcmp(cmd, "hold") && argc == 7)
        return hold(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]),
                    atoi(argv[6]));
    if (!strcmp(cmd, "localized") && argc == 4)
        return localized(atoi(argv[2]), strtoull(argv[3], NULL, 10));
    if (!strcmp(cmd, "offdevice") && argc == 4)
        return off_device(atoi(argv[2]), strtoull(argv[3], NULL, 10));
    if (!strcmp(cmd, "recapture") && argc == 5)
        return recapture(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(cmd, "v1") && argc == 3)
        return v1((unsigned)strtoul(argv[2], NULL, 10));
    if (!strcmp(cmd, "deepbind") && argc == 5)
        return deepbind(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]));
    fprintf(stderr, "memload: bad arguments\n");
    return 2;
}
