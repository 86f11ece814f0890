/* VMM memory shared between two containers: the exporter hands its POSIX file descriptor to a
 * process of another container over a UNIX socket (SCM_RIGHTS), as NVIDIA's IPC samples do.
 * Prototypes in cudrv.h; linked against libcuda.so.1 by name. Results: "NAME CODE|BYTES".
 *
 *   fdshare serve DEV BYTES SOCKET   create, map and export BYTES on DEV; print "listening";
 *                                    hand the descriptor to one client; when it hangs up,
 *                                    unmap and release
 *   fdshare fetch DEV BYTES SOCKET OTHER  receive it, import and map it; print the free memory;
 *                                    cuMemAlloc OTHER; unmap, release; print the free memory */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cudrv.h"

static int socket_at(const char *path, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    snprintf(addr->sun_path, sizeof addr->sun_path, "%s", path);
    return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

static int serve(int dev, size_t bytes, const char *path)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, dev}, NULL, {0}};
    Handle h;
    CUdeviceptr va;
    struct sockaddr_un addr;
    int fd = -1;
    char byte = 0, cbuf[CMSG_SPACE(sizeof(int))] = {0};
    use_device(dev);
    check(cuMemCreate(&h, bytes, &prop, 0), "cuMemCreate");
    check(map_at(dev, h, bytes, &va), "map");
    check(cuMemExportToShareableHandle(&fd, h, POSIX_FD, 0), "export");
    int s = socket_at(path, &addr);
    if (s < 0 || bind(s, (struct sockaddr *)&addr, sizeof addr) || listen(s, 1))
        return 3;
    printf("listening\n");
    int c = accept(s, NULL, NULL);
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof cbuf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    if (c < 0 || sendmsg(c, &msg, 0) != 1)
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
    CUdeviceptr va, p;
    struct sockaddr_un addr;
    int fd = -1;
    char byte = 0, cbuf[CMSG_SPACE(sizeof(int))] = {0};
    use_device(dev);
    int s = socket_at(path, &addr);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr))
        return 3;
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof cbuf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    if (recvmsg(s, &msg, 0) != 1 || !cm || cm->cmsg_type != SCM_RIGHTS)
        return 3;
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    CUresult rc = cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, POSIX_FD);
    printf("import %d\n", rc);
    printf("map %d\n", rc ? rc : map_at(dev, h, bytes, &va));
    print_free("free_imported", dev);
    rc = cuMemAlloc_v2(&p, other);
    printf("other %d\n", rc);
    if (!rc)
        cuMemFree_v2(p);
    printf("unmap %d\n", cuMemUnmap(va, bytes));
    printf("release %d\n", cuMemRelease(h));
    print_free("free_let_go", dev);
    close(s);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 5 || cuInit(0))
        return 2;
    if (!strcmp(argv[1], "serve") && argc == 5)
        return serve(atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4]);
    if (!strcmp(argv[1], "fetch") && argc == 6)
        return fetch(atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4],
                     strtoull(argv[5], NULL, 10));
    fprintf(stderr, "fdshare: bad arguments\n");
    return 2;
}
