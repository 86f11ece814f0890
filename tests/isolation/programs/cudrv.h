/* The CUDA Driver API types and prototypes the test programs call, declared once here from
 * NVIDIA's public CUDA Driver API reference (no NVIDIA header is used; the programs link against
 * libcuda.so.1 by name), and the helpers they share. Only the ABI matters: handles are opaque
 * pointers, device pointers 64-bit. Types carry short names; the comment names NVIDIA's. */
#ifndef VGPU_TEST_CUDRV_H
#define VGPU_TEST_CUDRV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long Handle; /* CUmemGenericAllocationHandle */
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent, *CUgraph, *CUgraphNode,
    *CUgraphExec, *CUarray, *CUmemoryPool;

typedef struct { int type, id; } Location; /* CUmemLocation */
typedef struct {                          /* CUmemAllocationProp */
    int type, handle_types;
    Location location;
    void *win32;
    unsigned char flags[8];
} AllocProp;
typedef struct { Location location; int flags; } AccessDesc; /* CUmemAccessDesc */
typedef struct {                                            /* CUmemPoolProps */
    int alloc_type, handle_types;
    Location location;
    void *win32;
    size_t max_size;
    unsigned short usage;
    unsigned char reserved[54];
} PoolProps;
typedef struct { /* CUDA_MEM_ALLOC_NODE_PARAMS */
    PoolProps pool_props;
    const AccessDesc *access;
    size_t access_count;
    size_t bytesize;
    CUdeviceptr dptr;
} AllocNodeParams;
typedef struct { /* CUDA_KERNEL_NODE_PARAMS_v2 (and _v3, CUgraphNodeParams' kernel member) */
    CUfunction func;
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    void **params, **extra;
    void *kern; /* CUkernel */
    CUcontext ctx;
} KernelNodeParamsV2;
typedef struct { /* CUgraphNodeParams: the type, 12 reserved bytes, the type's parameters */
    int type, reserved0[3];
    union {
        long long reserved1[29];
        KernelNodeParamsV2 kernel;
        AllocNodeParams alloc;
        CUdeviceptr free_dptr;                             /* CUDA_MEM_FREE_NODE_PARAMS */
        struct { CUgraph graph; int ownership; } child; /* CUDA_CHILD_GRAPH_NODE_PARAMS */
    } u;
    long long reserved2;
} NodeParams;

#define PINNED 1    /* CU_MEM_ALLOCATION_TYPE_PINNED */
#define ON_DEVICE 1 /* CU_MEM_LOCATION_TYPE_DEVICE */
#define READ_WRITE 3 /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */

/* Initialization, devices, contexts. */
CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGetAttribute(int *, int, CUdevice);
CUresult cuDeviceGetUuid(unsigned char *, CUdevice);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice);
CUresult cuCtxCreate_v2(CUcontext *, unsigned, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuCtxSetLimit(int, size_t); /* CUlimit is an enum */
CUresult cuCtxGetLimit(size_t *, int);
CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);

/* Memory. */
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemPoolCreate(CUmemoryPool *, const PoolProps *);
CUresult cuMemGetDefaultMemPool(CUmemoryPool *, Location *, int); /* CUDA 13.0 */
CUresult cuMemPoolSetAttribute(CUmemoryPool, int, void *);
CUresult cuMemPoolTrimTo(CUmemoryPool, size_t);
CUresult cuMemGetAllocationGranularity(size_t *, const AllocProp *, int);
CUresult cuMemCreate(Handle *, size_t, const AllocProp *, unsigned long long);
CUresult cuMemRelease(Handle);
CUresult cuMemRetainAllocationHandle(Handle *, void *);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemExportToShareableHandle(void *, Handle, int, unsigned long long);
CUresult cuMemImportFromShareableHandle(Handle *, void *, int);
#define POSIX_FD 1 /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, Handle, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const AccessDesc *, size_t);
typedef struct { char reserved[64]; } IpcHandle; /* CUipcMemHandle, passed by value */
CUresult cuIpcGetMemHandle(IpcHandle *, CUdeviceptr);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *, IpcHandle, unsigned);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);

/* Modules, launches, streams, events, graphs. */
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
/* CUlibrary and CUkernel are opaque handles; the options are CUjit_option and CUlibraryOption
 * arrays (none passed here). */
CUresult cuLibraryLoadData(void **, const void *, void *, void **, unsigned, void *, void **,
                           unsigned);
CUresult cuLibraryGetKernel(void **, void *, const char *);

/* Green contexts (CUDA 12.4). CUdevResource: its type, 92 bytes of internal padding, then a union
 * of 48 bytes whose SM member (CUdevSmResource) starts with smCount. CUgreenCtx and
 * CUdevResourceDesc are opaque handles. */
typedef struct {
    int type;
    unsigned char internal[92];
    union { unsigned sm_count; unsigned char oversize[48]; } u;
} DevResource;
#define DEV_RESOURCE_TYPE_SM 1   /* CU_DEV_RESOURCE_TYPE_SM */
#define GREEN_CTX_DEFAULT_STREAM 1 /* CU_GREEN_CTX_DEFAULT_STREAM */
#define STREAM_NON_BLOCKING 1      /* CU_STREAM_NON_BLOCKING */
CUresult cuDeviceGetDevResource(CUdevice, DevResource *, int);
CUresult cuDevResourceGenerateDesc(void **, DevResource *, unsigned);
CUresult cuGreenCtxCreate(void **, void *, CUdevice, unsigned);
CUresult cuGreenCtxStreamCreate(CUstream *, void *, unsigned, int);
CUresult cuGreenCtxDestroy(void *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamBeginRecaptureToGraph(CUstream, int, CUgraph, void *, void *); /* CUDA 13 */
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph *);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventQuery(CUevent);
CUresult cuGraphCreate(CUgraph *, unsigned);
CUresult cuGraphAddMemAllocNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                AllocNodeParams *);
CUresult cuGraphAddNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, NodeParams *);
CUresult cuGraphAddKernelNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                 const KernelNodeParamsV2 *);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
/* Updating an executable graph (CUDA 12.0 forms; cuGraphExecNodeSetParams since 12.2). The
 * result information is CUgraphExecUpdateResultInfo: the result, the error node and the node
 * its edge came from. */
typedef struct { int result; CUgraphNode error_node, error_from_node; } UpdateResultInfo;
CUresult cuGraphExecUpdate_v2(CUgraphExec, CUgraph, UpdateResultInfo *);
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const KernelNodeParamsV2 *);
CUresult cuGraphExecNodeSetParams(CUgraphExec, CUgraphNode, NodeParams *);
CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec, CUgraphNode, CUgraph);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphDestroy(CUgraph);
CUresult cuDeviceGraphMemTrim(CUdevice);

/* Ends the program (exit code 3) with one line naming the failed call and its code: a JSON
 * object when CUDRV_JSON_ERRORS is defined (the programs of hack/gpu-check.sh), else
 * "error CALL CODE". */
static inline void check(CUresult rc, const char *what)
{
    if (rc == 0)
        return;
#ifdef CUDRV_JSON_ERRORS
    printf("{\"error\": \"%s\", \"code\": %d}\n", what, rc);
#else
    printf("error %s %d\n", what, rc);
#endif
    fflush(stdout);
    exit(3);
}

/* Makes device `ordinal`'s primary context current. */
static inline void use_device(int ordinal)
{
    CUdevice dev;
    CUcontext ctx;
    check(cuDeviceGet(&dev, ordinal), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

/* Prints "NAME FREE": the free memory cuMemGetInfo_v2 reports on device `ordinal` (0 on error). */
static inline void print_free(const char *name, int ordinal)
{
    size_t free_b = 0, total = 0;
    use_device(ordinal);
    CUresult rc = cuMemGetInfo_v2(&free_b, &total);
    printf("%s %zu\n", name, rc ? 0 : free_b);
}

/* Reserves an address range for `bytes` of VMM handle `h` on device `dev`, maps it read-write. */
static inline CUresult map_at(int dev, Handle h, size_t bytes, CUdeviceptr *va)
{
    AccessDesc access = {{ON_DEVICE, dev}, READ_WRITE};
    CUresult rc = cuMemAddressReserve(va, bytes, 0, 0, 0);
    rc = rc ? rc : cuMemMap(*va, bytes, 0, h, 0);
    return rc ? rc : cuMemSetAccess(*va, bytes, &access, 1);
}

/* Prints "NAME CODE" for a cuMemAlloc_v2 of `bytes` on the current context, freed at once. */
static inline void try_alloc(const char *name, size_t bytes)
{
    CUdeviceptr p;
    CUresult rc = cuMemAlloc_v2(&p, bytes);
    printf("%s %d\n", name, rc);
    if (!rc)
        cuMemFree_v2(p);
}

/* Runs this program again as `NAME MODE DEV FD BYTES RFD WFD`: the importer of a shared VMM
 * allocation, which inherits descriptor `fd` across exec, reads `to_child[0]` and writes
 * `from_child[1]` (pipes made here). Its pid, or -1. */
static inline pid_t spawn_importer(const char *name, const char *mode, int dev, int fd,
                                   size_t bytes, int to_child[2], int from_child[2])
{
    char args[5][32];
    if (pipe(to_child) || pipe(from_child))
        return -1;
    snprintf(args[0], 32, "%d", dev);
    snprintf(args[1], 32, "%d", fd);
    snprintf(args[2], 32, "%zu", bytes);
    snprintf(args[3], 32, "%d", to_child[0]);
    snprintf(args[4], 32, "%d", from_child[1]);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", name, mode, args[0], args[1], args[2], args[3], args[4],
              (char *)NULL);
        _exit(4);
    }
    return pid;
}

/* Sends descriptor `fd` over the connected UNIX socket `sock` (SCM_RIGHTS); 0 or -1. */
static inline int send_fd(int sock, int fd)
{
    char byte = 0, cbuf[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof cbuf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

/* The descriptor sent over `sock`, or -1. */
static inline int recv_fd(int sock)
{
    int fd = -1;
    char byte = 0, cbuf[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof cbuf};
    struct cmsghdr *cm = recvmsg(sock, &msg, 0) == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (cm && cm->cmsg_type == SCM_RIGHTS)
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    return fd;
}

/* Runs this program again as `NAME MODE DEV BYTES SOCKFD` in a child holding one end of a UNIX
 * socket pair (to send a descriptor over); *sock is this process's end. The child's pid, or -1. */
static inline pid_t spawn_sender(const char *name, const char *mode, int dev, size_t bytes,
                                 int *sock)
{
    int sv[2];
    char args[3][32];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return -1;
    snprintf(args[0], 32, "%d", dev);
    snprintf(args[1], 32, "%zu", bytes);
    snprintf(args[2], 32, "%d", sv[1]);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", name, mode, args[0], args[1], args[2], (char *)NULL);
        _exit(4);
    }
    close(sv[1]);
    *sock = sv[0];
    return pid;
}

/* Imports descriptor `fd` and maps it at *va: the import's and the mapping's codes, printed. */
static inline CUresult import_mapped(int dev, int fd, size_t bytes, Handle *h, CUdeviceptr *va)
{
    CUresult rc = cuMemImportFromShareableHandle(h, (void *)(intptr_t)fd, POSIX_FD);
    printf("import %d\n", rc);
    rc = rc ? rc : map_at(dev, *h, bytes, va);
    printf("map %d\n", rc);
    return rc;
}

#endif
