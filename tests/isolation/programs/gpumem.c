/* The real-GPU memory program of hack/gpu-check.sh: the memory that outlives the call that
 * obtained it, and the total a CUDA program is told. Prototypes in cudrv.h (from NVIDIA's
 * public Driver API reference); linked against libcuda.so.1 by name. Each mode prints one JSON
 * object (result codes as the driver's CUresult numbers).
 *
 *   gpumem vmm BYTES     NVIDIA's VMM sample pattern: cuMemCreate BYTES (rounded up to the
 *                        granularity), reserve, map, grant access, cuMemRelease at once; then a
 *                        second cuMemCreate BYTES while the first stays mapped ("second" is its
 *                        code); then unmap and create once more ("after_unmap")
 *   gpumem graph BYTES   two cuGraphAddMemAllocNode of BYTES in one graph (a captured
 *                        cudaMallocAsync becomes such a node): each node's code
 *   gpumem capture BYTES two cuMemAllocAsync of BYTES inside a global-mode stream capture
 *                        (graph memory nodes at capture): each code, and the capture's end
 *   gpumem share BYTES   shared VMM memory outliving its exporter's release: cuMemCreate BYTES as a
 *                        POSIX file descriptor, map, export ("regular": the descriptor is a regular
 *                        file, "distinct": a second export's file has another inode); a
 *                        child ("gpumem import DEV FD BYTES RFD WFD") imports and maps it; then
 *                        this process unmaps and releases its own and creates BYTES again while
 *                        the child holds it ("while_held"), and after the child let go
 *                        ("after_let_go")
 *   gpumem keep BYTES    a descriptor kept after its only handle was released (cuMemRelease:
 *                        freed only once every reference "including its shareable
 *                        counterparts" is): cuMemCreate BYTES as a POSIX file descriptor,
 *                        export, release, never mapped; BYTES created again while the
 *                        descriptor is open ("while_kept") and after it is closed
 *                        ("after_close"); cuMemGetInfo_v2's free before and after the close
 *                        (run bare, they say whether the driver itself kept the memory)
 *   gpumem ipc BYTES     legacy IPC memory outliving its exporter's free: cuMemAlloc BYTES,
 *                        cuIpcGetMemHandle; a child ("gpumem ipcopen DEV -1 BYTES RFD WFD") reads
 *                        the handle, opens it and reports cuMemGetAddressRange_v2's size and
 *                        cuPointerGetAttribute's device ordinal ("ordinal"); then
 *                        this process frees its allocation and allocates BYTES again while the
 *                        child holds it open ("while_held"), and after the child closed it
 *                        ("after_close"); cuMemGetInfo_v2's free before and after the free and
 *                        after the close (run bare, they say whether the driver kept the memory)
 *   gpumem limits BYTES  context limits that size device memory (cuCtxSetLimit, what
 *                        cudaDeviceSetLimit calls): the malloc heap set to BYTES ("heap" is its
 *                        code), then the per-thread stack raised by 1 KiB ("stack"), with
 *                        cuMemGetInfo_v2's free before and after the raise ("stack_took": what
 *                        it took; run bare, what the driver itself reserved for it) and after
 *                        it is lowered back ("free_restored")
 *   gpumem total         what the CUDA runtime's cudaGetDeviceProperties reads for totalGlobalMem:
 *                        cuDeviceTotalMem_v2, called directly and through cuGetProcAddress at
 *                        CUDA 12.0 (how the runtime reaches the driver), beside cuMemGetInfo_v2 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CUDRV_JSON_ERRORS
#include "cudrv.h"

#define GRANULARITY_MINIMUM 0 /* CU_MEM_ALLOC_GRANULARITY_MINIMUM */

/* One create of BYTES on device 0 (pinned, device-local): its code, the handle in *h. */
static CUresult create(Handle *h, size_t bytes)
{
    AllocProp prop = {PINNED, 0, {ON_DEVICE, 0}, NULL, {0}};
    return cuMemCreate(h, bytes, &prop, 0);
}

static int vmm(size_t bytes)
{
    AllocProp prop = {PINNED, 0, {ON_DEVICE, 0}, NULL, {0}};
    AccessDesc access = {{ON_DEVICE, 0}, READ_WRITE};
    size_t grain = 0;
    check(cuMemGetAllocationGranularity(&grain, &prop, GRANULARITY_MINIMUM), "granularity");
    bytes = (bytes + grain - 1) / grain * grain;
    Handle first, second, third;
    CUdeviceptr va;
    check(create(&first, bytes), "cuMemCreate");
    check(cuMemAddressReserve(&va, bytes, 0, 0, 0), "cuMemAddressReserve");
    check(cuMemMap(va, bytes, 0, first, 0), "cuMemMap");
    check(cuMemSetAccess(va, bytes, &access, 1), "cuMemSetAccess");
    check(cuMemRelease(first), "cuMemRelease"); /* the sample's pattern: memory lives on, mapped */
    CUresult mapped = create(&second, bytes);
    if (mapped == 0)
        cuMemRelease(second);
    check(cuMemUnmap(va, bytes), "cuMemUnmap"); /* now the driver frees the first */
    CUresult unmapped = create(&third, bytes);
    if (unmapped == 0)
        cuMemRelease(third);
    cuMemAddressFree(va, bytes);
    printf("{\"bytes\": %zu, \"second\": %d, \"after_unmap\": %d}\n", bytes, mapped, unmapped);
    return 0;
}

static int graph(size_t bytes)
{
    CUgraph g;
    CUresult codes[2];
    check(cuGraphCreate(&g, 0), "cuGraphCreate");
    for (int i = 0; i < 2; i++) { /* no access descriptors: they describe peer access only */
        AllocNodeParams p = {{PINNED, 0, {ON_DEVICE, 0}, NULL, 0, 0, {0}}, NULL, 0, bytes, 0};
        CUgraphNode node;
        codes[i] = cuGraphAddMemAllocNode(&node, g, NULL, 0, &p);
    }
    cuGraphDestroy(g);
    printf("{\"bytes\": %zu, \"codes\": [%d, %d]}\n", bytes, codes[0], codes[1]);
    return 0;
}

/* Two cuMemAllocAsync of BYTES on a stream of device 0 inside a global-mode capture (what
 * torch.cuda.graph does with a cudaMallocAsync): each becomes a graph memory node; then the
 * capture's end. */
static int capture(size_t bytes)
{
    CUstream s;
    CUgraph g = NULL;
    CUresult codes[2];
    check(cuStreamCreate(&s, 0), "cuStreamCreate");
    check(cuStreamBeginCapture_v2(s, 0), "cuStreamBeginCapture_v2"); /* GLOBAL */
    for (int i = 0; i < 2; i++) {
        CUdeviceptr d;
        codes[i] = cuMemAllocAsync(&d, bytes, s);
    }
    CUresult end = cuStreamEndCapture(s, &g);
    if (g)
        cuGraphDestroy(g);
    printf("{\"bytes\": %zu, \"codes\": [%d, %d], \"end\": %d}\n", bytes, codes[0], codes[1],
           end);
    return 0;
}

/* The child of `share`: imports and maps the descriptor, says so on `wfd` (its codes), waits for
 * a byte on `rfd`, then unmaps and releases. */
static int import(int dev, int fd, size_t bytes, int rfd, int wfd)
{
    Handle h;
    CUdeviceptr va = 0;
    char go = 0;
    CUresult rc = cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, POSIX_FD);
    CUresult mapped = rc ? rc : map_at(dev, h, bytes, &va);
    int codes[2] = {rc, mapped};
    if (write(wfd, codes, sizeof codes) != sizeof codes || read(rfd, &go, 1) != 1)
        return 3;
    if (!mapped)
        cuMemUnmap(va, bytes);
    if (!rc)
        cuMemRelease(h);
    return 0;
}

/* Creates BYTES and releases it at once when it was granted: the code. */
static CUresult create_once(size_t bytes)
{
    Handle h;
    CUresult rc = create(&h, bytes);
    if (rc == 0)
        cuMemRelease(h);
    return rc;
}

static int share(size_t bytes)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, 0}, NULL, {0}};
    size_t grain = 0;
    check(cuMemGetAllocationGranularity(&grain, &prop, GRANULARITY_MINIMUM), "granularity");
    bytes = (bytes + grain - 1) / grain * grain;
    Handle h;
    CUdeviceptr va;
    int fd = -1, again = -1, to_child[2], from_child[2], status = 0;
    struct stat st, st2;
    int codes[2] = {-1, -1};
    check(cuMemCreate(&h, bytes, &prop, 0), "cuMemCreate");
    check(map_at(0, h, bytes, &va), "map");
    check(cuMemExportToShareableHandle(&fd, h, POSIX_FD, 0), "cuMemExportToShareableHandle");
    check(cuMemExportToShareableHandle(&again, h, POSIX_FD, 0), "export again");
    int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    int distinct = fstat(again, &st2) == 0 && (st.st_dev != st2.st_dev || st.st_ino != st2.st_ino);
    close(again);
    pid_t pid = spawn_importer("gpumem", "import", 0, fd, bytes, to_child, from_child);
    if (pid < 0)
        return 3;
    close(fd);
    if (read(from_child[0], codes, sizeof codes) != sizeof codes)
        codes[0] = codes[1] = -1;
    check(cuMemUnmap(va, bytes), "cuMemUnmap");
    check(cuMemRelease(h), "cuMemRelease"); /* the child's import still holds the memory */
    CUresult held = create_once(bytes);
    if (write(to_child[1], "g", 1) != 1)
        return 3;
    waitpid(pid, &status, 0);
    CUresult after = create_once(bytes);
    printf("{\"bytes\": %zu, \"regular\": %d, \"distinct\": %d, \"import\": %d, \"map\": %d, "
           "\"while_held\": %d, \"after_let_go\": %d}\n",
           bytes, regular, distinct, codes[0], codes[1], held, after);
    return 0;
}

/* Allocates BYTES, frees it at once when granted: the code. */
static CUresult alloc_once(size_t bytes)
{
    CUdeviceptr p;
    CUresult rc = cuMemAlloc_v2(&p, bytes);
    if (rc == 0)
        cuMemFree_v2(p);
    return rc;
}

static size_t free_now(void)
{
    size_t free_b = 0, total_b = 0;
    return cuMemGetInfo_v2(&free_b, &total_b) ? 0 : free_b;
}

static int keep(size_t bytes)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, 0}, NULL, {0}};
    size_t grain = 0;
    struct stat st;
    Handle h;
    int fd = -1;
    check(cuMemGetAllocationGranularity(&grain, &prop, GRANULARITY_MINIMUM), "granularity");
    bytes = (bytes + grain - 1) / grain * grain;
    check(cuMemCreate(&h, bytes, &prop, 0), "cuMemCreate");
    check(cuMemExportToShareableHandle(&fd, h, POSIX_FD, 0), "cuMemExportToShareableHandle");
    check(cuMemRelease(h), "cuMemRelease");
    int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    CUresult kept = create_once(bytes);
    size_t free_kept = free_now();
    close(fd);
    size_t free_closed = free_now();
    CUresult after = create_once(bytes);
    printf("{\"bytes\": %zu, \"regular\": %d, \"while_kept\": %d, \"after_close\": %d, "
           "\"free_kept\": %zu, \"free_closed\": %zu}\n",
           bytes, regular, kept, after, free_kept, free_closed);
    return 0;
}

/* The child of `ipc`: reads the handle on `rfd`, opens it, writes its codes and the opened
 * range's size on `wfd`, waits for a byte, closes. */
static int ipcopen(int rfd, int wfd)
{
    IpcHandle h;
    CUdeviceptr p = 0, base = 0;
    size_t size = 0;
    char go = 0;
    if (read(rfd, &h, sizeof h) != sizeof h)
        return 3;
    CUresult rc = cuIpcOpenMemHandle_v2(&p, h, 1); /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
    CUresult range = rc ? rc : cuMemGetAddressRange_v2(&base, &size, p);
    int ordinal = -1; /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: the GPU holding it */
    if (!rc && cuPointerGetAttribute(&ordinal, 9, p))
        ordinal = -1;
    unsigned long long out[4] = {(unsigned)rc, (unsigned)range, size, (unsigned)ordinal};
    if (write(wfd, out, sizeof out) != sizeof out || read(rfd, &go, 1) != 1)
        return 3;
    if (!rc)
        cuIpcCloseMemHandle(p);
    return 0;
}

static int ipc(size_t bytes)
{
    CUdeviceptr p;
    IpcHandle h;
    int to_child[2], from_child[2], status = 0;
    unsigned long long got[4] = {~0ull, ~0ull, 0, ~0ull};
    check(cuMemAlloc_v2(&p, bytes), "cuMemAlloc_v2");
    check(cuIpcGetMemHandle(&h, p), "cuIpcGetMemHandle");
    pid_t pid = spawn_importer("gpumem", "ipcopen", 0, -1, bytes, to_child, from_child);
    if (pid < 0 || write(to_child[1], &h, sizeof h) != sizeof h ||
        read(from_child[0], got, sizeof got) != sizeof got)
        return 3;
    size_t before = free_now();
    CUresult freed = cuMemFree_v2(p); /* before the child's close: undefined, taken as kept */
    size_t after_free = free_now();
    CUresult held = alloc_once(bytes);
    if (write(to_child[1], "g", 1) != 1)
        return 3;
    waitpid(pid, &status, 0);
    size_t after_close = free_now();
    printf("{\"bytes\": %zu, \"open\": %d, \"range\": %d, \"size\": %llu, \"ordinal\": %d, "
           "\"free\": %d, "
           "\"while_held\": %d, \"after_close\": %d, \"free_before_free\": %zu, "
           "\"free_after_free\": %zu, \"free_after_close\": %zu}\n",
           bytes, (int)got[0], (int)got[1], got[2], (int)got[3], freed, held, alloc_once(bytes), before,
           after_free, after_close);
    return 0;
}

static int total(void)
{
    typedef CUresult (*total_fn)(size_t *, int);
    size_t direct = 0, looked_up = 0, free_b = 0, info_total = 0;
    void *fn = NULL;
    int dev;
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDeviceTotalMem_v2(&direct, dev), "cuDeviceTotalMem_v2");
    check(cuGetProcAddress("cuDeviceTotalMem", &fn, 12000, 0), "cuGetProcAddress");
    check(((total_fn)fn)(&looked_up, dev), "cuDeviceTotalMem by cuGetProcAddress");
    check(cuMemGetInfo_v2(&free_b, &info_total), "cuMemGetInfo_v2");
    printf("{\"total_mem\": %zu, \"total_mem_by_proc_address\": %zu, \"mem_info_total\": %zu, "
           "\"mem_info_free\": %zu}\n",
           direct, looked_up, info_total, free_b);
    return 0;
}

static int limits(size_t bytes)
{
    enum { STACK = 0, HEAP = 2 }; /* CU_LIMIT_STACK_SIZE, CU_LIMIT_MALLOC_HEAP_SIZE */
    size_t stack = 0, before, raised;
    CUresult heap = cuCtxSetLimit(HEAP, bytes);
    check(cuCtxGetLimit(&stack, STACK), "cuCtxGetLimit");
    before = free_now();
    CUresult raise = cuCtxSetLimit(STACK, stack + 1024);
    raised = free_now();
    check(cuCtxSetLimit(STACK, stack), "cuCtxSetLimit back");
    printf("{\"heap\": %d, \"stack\": %d, \"stack_bytes\": %zu, \"free_before\": %zu, "
           "\"stack_took\": %lld, \"free_restored\": %zu}\n",
           (int)heap, (int)raise, stack, before, (long long)before - (long long)raised, free_now());
    return 0;
}

int main(int argc, char **argv)
{
    CUcontext ctx;
    int dev;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    if (argc == 3 && !strcmp(argv[1], "vmm"))
        return vmm(strtoull(argv[2], NULL, 10));
    if (argc == 3 && !strcmp(argv[1], "graph"))
        return graph(strtoull(argv[2], NULL, 10));
    if (argc == 3 && !strcmp(argv[1], "capture"))
        return capture(strtoull(argv[2], NULL, 10));
    if (argc == 2 && !strcmp(argv[1], "total"))
        return total();
    if (argc == 3 && !strcmp(argv[1], "limits"))
        return limits(strtoull(argv[2], NULL, 10));
    if (argc == 3 && !strcmp(argv[1], "share"))
        return share(strtoull(argv[2], NULL, 10));
    if (argc == 3 && !strcmp(argv[1], "keep"))
        return keep(strtoull(argv[2], NULL, 10));
    if (argc == 3 && !strcmp(argv[1], "ipc"))
        return ipc(strtoull(argv[2], NULL, 10));
    if (argc == 7 && !strcmp(argv[1], "ipcopen"))
        return ipcopen(atoi(argv[5]), atoi(argv[6]));
    if (argc == 7 && !strcmp(argv[1], "import"))
        return import(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]),
                      atoi(argv[6]));
    fprintf(stderr, "usage: gpumem vmm BYTES | gpumem graph BYTES | gpumem capture BYTES | "
                    "gpumem share BYTES | gpumem keep BYTES | gpumem ipc BYTES | gpumem limits BYTES | "
                    "gpumem total\n");
    return 2;
}
