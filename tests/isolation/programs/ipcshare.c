/* Legacy CUDA IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle), as
 * torch.multiprocessing shares CUDA tensors: the exporter sends the 64-byte handle, the importer
 * opens it. Prototypes in cudrv.h; linked against libcuda.so.1 by name. "NAME CODE|BYTES" lines.
 *
 *   ipcshare pair DEV BYTES OTHER free|freeasync|kill   within one container: a child ("give
 *                          DEV BYTES SOCKFD") allocates and exports BYTES; this process opens the
 *                          handle (twice: one reference more), then the child frees it
 *                          (cuMemFree or cuMemFreeAsync) and lives on, or is SIGKILLed holding it; the free memory, cuMemAlloc OTHER; two
 *                          closes; the free memory, cuMemAlloc OTHER again
 *   ipcshare serve DEV BYTES SOCKET   allocate and export BYTES; print "listening"; send the
 *                          handle to one client; when it hangs up, print the free memory, free
 *   ipcshare fetch DEV SOCKET OTHER [HOLDER]   receive the handle and open it on DEV's
 *                          context (cuGetProcAddress's pointer); the free memory (and HOLDER's,
 *                          the exporter's GPU when it is another) and the
 *                          opened range's size; cuMemAlloc OTHER; close; the free memory */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "cudrv.h"

static int socket_at(const char *path, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    snprintf(addr->sun_path, sizeof addr->sun_path, "%s", path);
    return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

static int read_all(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* BYTES allocated on DEV and exported: the allocation in *p, its handle in *h. */
static void export_new(int dev, size_t bytes, CUdeviceptr *p, IpcHandle *h)
{
    use_device(dev);
    check(cuMemAlloc_v2(p, bytes), "cuMemAlloc_v2");
    check(cuIpcGetMemHandle(h, *p), "cuIpcGetMemHandle");
}

/* The exporter of `pair`: sends its handle over `sock`; on a byte ('f': cuMemFree, 'a':
 * cuMemFreeAsync), frees and says so, then lives until the other end hangs up. */
static int give(int dev, size_t bytes, int sock)
{
    CUdeviceptr p;
    IpcHandle h;
    char byte;
    export_new(dev, bytes, &p, &h);
    if (write(sock, &h, sizeof h) != (ssize_t)sizeof h || read(sock, &byte, 1) != 1)
        return 3;
    printf("free %d\n", byte == 'a' ? cuMemFreeAsync(p, NULL) : cuMemFree_v2(p));
    if (write(sock, &byte, 1) != 1)
        return 3;
    while (read(sock, &byte, 1) > 0) {
    }
    return 0;
}

/* Opens `h` twice in this context: the second open must return the same pointer. */
static CUresult open_twice(const IpcHandle *h, CUdeviceptr *p)
{
    CUdeviceptr again = 0;
    CUresult rc = cuIpcOpenMemHandle_v2(p, *h, 1);
    printf("open %d\n", rc);
    if (rc)
        return rc;
    printf("reopen %d\n", cuIpcOpenMemHandle_v2(&again, *h, 1));
    printf("same %d\n", again == *p);
    return 0;
}

static int pair(int dev, size_t bytes, size_t other, const char *how)
{
    CUdeviceptr p;
    IpcHandle h;
    int sv[2], status = 0;
    char args[3][32], byte = strcmp(how, "freeasync") ? 'f' : 'a';
    use_device(dev);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || fcntl(sv[0], F_SETFD, FD_CLOEXEC))
        return 3; /* the exporter keeps only its own end: it sees this one hang up */
    snprintf(args[0], 32, "%d", dev);
    snprintf(args[1], 32, "%zu", bytes);
    snprintf(args[2], 32, "%d", sv[1]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "ipcshare", "give", args[0], args[1], args[2], (char *)NULL);
        _exit(4);
    }
    close(sv[1]);
    if (read_all(sv[0], &h, sizeof h) || open_twice(&h, &p))
        return 3;
    print_free("free_opened", dev);
    if (!strcmp(how, "kill")) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    } else if (write(sv[0], &byte, 1) != 1 || read(sv[0], &byte, 1) != 1) {
        return 3;
    }
    print_free("free_exporter_gone", dev);
    try_alloc("other", other);
    printf("close %d\n", cuIpcCloseMemHandle(p));
    print_free("free_closed_once", dev);
    printf("close %d\n", cuIpcCloseMemHandle(p));
    print_free("free_closed", dev);
    try_alloc("other_after", other);
    close(sv[0]); /* the exporter, alive after its free, may exit now */
    waitpid(pid, &status, 0);
    return 0;
}

static int serve(int dev, size_t bytes, const char *path)
{
    CUdeviceptr p;
    IpcHandle h;
    struct sockaddr_un addr;
    char byte = 0;
    export_new(dev, bytes, &p, &h);
    int s = socket_at(path, &addr);
    if (s < 0 || bind(s, (struct sockaddr *)&addr, sizeof addr) || listen(s, 1))
        return 3;
    printf("listening\n");
    int c = accept(s, NULL, NULL);
    if (c < 0 || write(c, &h, sizeof h) != (ssize_t)sizeof h)
        return 3;
    while (read(c, &byte, 1) > 0) {
    }
    print_free("free_served", dev);
    printf("free %d\n", cuMemFree_v2(p));
    return 0;
}

typedef CUresult (*open_fn)(CUdeviceptr *, IpcHandle, unsigned);

/* Opens through the pointer cuGetProcAddress hands out, as the CUDA runtime reaches the driver. */
static int fetch(int dev, const char *path, size_t other, int holder)
{
    void *fn = NULL;
    CUdeviceptr p, base = 0;
    IpcHandle h;
    size_t size = 0;
    struct sockaddr_un addr;
    use_device(dev);
    int s = socket_at(path, &addr);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) || read_all(s, &h, sizeof h))
        return 3;
    check(cuGetProcAddress("cuIpcOpenMemHandle", &fn, 12000, 0), "cuGetProcAddress");
    CUresult rc = ((open_fn)fn)(&p, h, 1);
    printf("open %d\n", rc);
    if (rc)
        return 0;
    if (holder >= 0)
        print_free("free_holder", holder);
    print_free("free_opened", dev);
    printf("range %d\n", cuMemGetAddressRange_v2(&base, &size, p));
    printf("size %zu\n", size);
    try_alloc("other", other);
    printf("close %d\n", cuIpcCloseMemHandle(p));
    print_free("free_closed", dev);
    close(s);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 5 || cuInit(0))
        return 2;
    if (!strcmp(argv[1], "give") && argc == 5)
        return give(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(argv[1], "pair") && argc == 6)
        return pair(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10),
                    argv[5]);
    if (!strcmp(argv[1], "serve") && argc == 5)
        return serve(atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4]);
    if (!strcmp(argv[1], "fetch") && (argc == 5 || argc == 6))
        return fetch(atoi(argv[2]), argv[3], strtoull(argv[4], NULL, 10),
                     argc == 6 ? atoi(argv[5]) : -1);
    fprintf(stderr, "ipcshare: bad arguments\n");
    return 2;
}
