/* VMM memory shared between processes, of two containers or of one: the exporter hands its POSIX
 * file descriptor over a UNIX socket (SCM_RIGHTS), as NVIDIA's IPC samples do.
 * Prototypes in cudrv.h; linked against libcuda.so.1 by name. Results: "NAME CODE|BYTES".
 *
 *   fdshare serve DEV BYTES SOCKET   create, map and export BYTES on DEV; print "listening";
 *                                    hand the descriptor to one client; when it hangs up,
 *                                    unmap and release
 *   fdshare fetch DEV BYTES SOCKET OTHER  receive it, import and map it; print the free memory;
 *                                    cuMemAlloc OTHER; unmap, release; print the free memory
 *   fdshare orphan DEV BYTES OTHER   within one container: a child ("give DEV BYTES SOCKFD")
 *                                    exports to this process, which imports and maps, then
 *                                    SIGKILLs the child; the free memory, cuMemAlloc OTHER;
 *                                    unmap, release; the free memory, cuMemAlloc OTHER again
 *   fdshare keep DEV BYTES N         N times (up to 128): create BYTES (never mapped), export,
 *                                    release, keep the descriptor; the free memory; import and
 *                                    map the first
 *                                    descriptor again; the free memory; unmap, release, close
 *                                    every descriptor; the free memory
 *   fdshare handoff DEV BYTES OTHER  within one container: a child ("drop DEV BYTES SOCKFD")
 *                                    creates, exports, sends the descriptor here, releases and
 *                                    exits; this process keeps the descriptor: the free memory,
 *                                    cuMemAlloc OTHER; closes it: the free memory, OTHER again */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cudrv.h"

static int socket_at(const char *path, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    snprintf(addr->sun_path, sizeof addr->sun_path, "%s", path);
    return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

/* Sends descriptor `fd` over the connected UNIX socket `sock` (SCM_RIGHTS); 0 or -1. */
static int send_fd(int sock, int fd)
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
static int recv_fd(int sock)
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

/* BYTES on DEV, created as a POSIX file descriptor, mapped at *va and exported: the descriptor. */
static int export_new(int dev, size_t bytes, Handle *h, CUdeviceptr *va)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, dev}, NULL, {0}};
    int fd = -1;
    use_device(dev);
    check(cuMemCreate(h, bytes, &prop, 0), "cuMemCreate");
    check(map_at(dev, *h, bytes, va), "map");
    check(cuMemExportToShareableHandle(&fd, *h, POSIX_FD, 0), "export");
    return fd;
}

static int serve(int dev, size_t bytes, const char *path)
{
    Handle h;
    CUdeviceptr va;
    struct sockaddr_un addr;
    char byte = 0;
    int fd = export_new(dev, bytes, &h, &va);
    int s = socket_at(path, &addr);
    if (s < 0 || bind(s, (struct sockaddr *)&addr, sizeof addr) || listen(s, 1))
        return 3;
    printf("listening\n");
    int c = accept(s, NULL, NULL);
    if (c < 0 || send_fd(c, fd))
        return 3;
    while (read(c, &byte, 1) > 0) {
    }
    print_free("free_served", dev);
    printf("unmap %d\n", cuMemUnmap(va, bytes));
    printf("release %d\n", cuMemRelease(h));
    return 0;
}

/* Imports and maps the descriptor at *va: the import's and the mapping's codes, printed. */
static CUresult import_mapped(int dev, int fd, size_t bytes, Handle *h, CUdeviceptr *va)
{
    CUresult rc = cuMemImportFromShareableHandle(h, (void *)(intptr_t)fd, POSIX_FD);
    printf("import %d\n", rc);
    rc = rc ? rc : map_at(dev, *h, bytes, va);
    printf("map %d\n", rc);
    return rc;
}

static int fetch(int dev, size_t bytes, const char *path, size_t other)
{
    Handle h;
    CUdeviceptr va;
    struct sockaddr_un addr;
    use_device(dev);
    int s = socket_at(path, &addr);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr))
        return 3;
    int fd = recv_fd(s);
    if (import_mapped(dev, fd, bytes, &h, &va))
        return 0;
    close(fd); /* the descriptor is a reference of its own (cuMemRelease): not kept */
    print_free("free_imported", dev);
    try_alloc("other", other);
    printf("unmap %d\n", cuMemUnmap(va, bytes));
    printf("release %d\n", cuMemRelease(h));
    print_free("free_let_go", dev);
    close(s);
    return 0;
}

/* The exporter of `orphan`: sends its descriptor over `sock`, then waits to be killed. */
static int give(int dev, size_t bytes, int sock)
{
    Handle h;
    CUdeviceptr va;
    char byte;
    if (send_fd(sock, export_new(dev, bytes, &h, &va)))
        return 3;
    while (read(sock, &byte, 1) > 0) {
    }
    return 0;
}

/* A process of the same container exports (`give`), this one imports and maps, and the
 * exporter is SIGKILLed holding its handle and mapping: the memory is this process's now. */
static int orphan(int dev, size_t bytes, size_t other)
{
    Handle h;
    CUdeviceptr va;
    int sv[2], status = 0;
    char args[3][32];
    use_device(dev);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return 3;
    snprintf(args[0], 32, "%d", dev);
    snprintf(args[1], 32, "%zu", bytes);
    snprintf(args[2], 32, "%d", sv[1]);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "fdshare", "give", args[0], args[1], args[2], (char *)NULL);
        _exit(4);
    }
    close(sv[1]);
    int fd = recv_fd(sv[0]);
    if (import_mapped(dev, fd, bytes, &h, &va))
        return 0;
    close(fd); /* the descriptor is a reference of its own (cuMemRelease): not kept */
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    print_free("free_exporter_killed", dev);
    try_alloc("other", other);
    printf("unmap %d\n", cuMemUnmap(va, bytes));
    printf("release %d\n", cuMemRelease(h));
    print_free("free_let_go", dev);
    try_alloc("other_after", other);
    return 0;
}

/* NVIDIA's cuMemRelease: memory is freed when every mapping is unmapped and every reference
 * "(including its shareable counterparts)" is released: each descriptor kept here keeps its
 * allocation alive after its only handle was released, unmapped or not. */
static int keep(int dev, size_t bytes, int n)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, dev}, NULL, {0}};
    int fds[128], kept = 0;
    Handle h;
    CUdeviceptr va;
    use_device(dev);
    for (int i = 0; i < n && i < 128; i++) {
        CUresult rc = cuMemCreate(&h, bytes, &prop, 0);
        printf("rc %d\n", rc);
        if (rc)
            continue;
        rc = cuMemExportToShareableHandle(&fds[kept], h, POSIX_FD, 0);
        printf("export %d\n", rc);
        kept += rc == 0;
        check(cuMemRelease(h), "release");
    }
    print_free("free_kept", dev);
    if (kept && !import_mapped(dev, fds[0], bytes, &h, &va)) {
        print_free("free_imported", dev);
        printf("unmap %d\n", cuMemUnmap(va, bytes));
        printf("release %d\n", cuMemRelease(h));
    }
    print_free("free_released", dev);
    for (int i = 0; i < kept; i++)
        close(fds[i]);
    print_free("free_closed", dev);
    return 0;
}

/* The exporter of `handoff`: creates, exports, sends the descriptor over `sock`, closes its
 * own copy, releases the handle and exits. */
static int drop(int dev, size_t bytes, int sock)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, dev}, NULL, {0}};
    Handle h;
    int fd = -1;
    use_device(dev);
    check(cuMemCreate(&h, bytes, &prop, 0), "cuMemCreate");
    check(cuMemExportToShareableHandle(&fd, h, POSIX_FD, 0), "export");
    if (send_fd(sock, fd))
        return 3;
    close(fd);
    check(cuMemRelease(h), "release");
    return 0;
}

/* A process of the same container is handed a descriptor whose exporter then exits: the
 * descriptor alone keeps the memory until this process closes it. */
static int handoff(int dev, size_t bytes, size_t other)
{
    int sv[2], status = 0;
    char args[3][32];
    use_device(dev);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return 3;
    snprintf(args[0], 32, "%d", dev);
    snprintf(args[1], 32, "%zu", bytes);
    snprintf(args[2], 32, "%d", sv[1]);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "fdshare", "drop", args[0], args[1], args[2], (char *)NULL);
        _exit(4);
    }
    close(sv[1]);
    int fd = recv_fd(sv[0]);
    waitpid(pid, &status, 0);
    printf("exporter %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    print_free("free_exporter_gone", dev);
    try_alloc("other", other);
    close(fd);
    print_free("free_closed", dev);
    try_alloc("other_after", other);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 5 || cuInit(0))
        return 2;
    if (!strcmp(argv[1], "give") && argc == 5)
        return give(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(argv[1], "orphan") && argc == 5)
        return orphan(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    if (!strcmp(argv[1], "keep") && argc == 5)
        return keep(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(argv[1], "drop") && argc == 5)
        return drop(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(argv[1], "handoff") && argc == 5)
        return handoff(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    if (!strcmp(argv[1], "serve") && argc == 5)
        return serve(atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4]);
    if (!strcmp(argv[1], "fetch") && argc == 6)
        return fetch(atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4],
                     strtoull(argv[5], NULL, 10));
    fprintf(stderr, "fdshare: bad arguments\n");
    return 2;
}
