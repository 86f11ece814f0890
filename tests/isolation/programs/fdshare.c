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
 *                                    unmap, release; the free memory, cuMemAlloc OTHER again */
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
    int sock, status = 0;
    use_device(dev);
    pid_t pid = spawn_sender("fdshare", "give", dev, bytes, &sock);
    if (pid < 0)
        return 3;
    int fd = recv_fd(sock);
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

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 5 || cuInit(0))
        return 2;
    if (!strcmp(argv[1], "give") && argc == 5)
        return give(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(argv[1], "orphan") && argc == 5)
        return orphan(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    if (!strcmp(argv[1], "serve") && argc == 5)
        return serve(atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4]);
    if (!strcmp(argv[1], "fetch") && argc == 6)
        return fetch(atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4],
                     strtoull(argv[5], NULL, 10));
    fprintf(stderr, "fdshare: bad arguments\n");
    return 2;
}
