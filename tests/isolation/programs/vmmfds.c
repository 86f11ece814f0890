/* Exported VMM descriptors as references to their memory: NVIDIA's cuMemRelease frees an
 * allocation "when all outstanding mappings to the memory are unmapped and when all outstanding
 * references to the handle (including its shareable counterparts) are also released", and an
 * exported POSIX file descriptor is such a counterpart. Prototypes in cudrv.h; linked against
 * libcuda.so.1 by name. Results: "NAME CODE|BYTES".
 *
 *   vmmfds keep DEV BYTES N          N times (up to 128): create BYTES (never mapped), export,
 *                                    release, keep the descriptor; the free memory; import and
 *                                    map the first descriptor; the free memory; unmap, release;
 *                                    the free memory; close every descriptor; the free memory
 *   vmmfds handoff DEV BYTES OTHER   a child ("drop DEV BYTES SOCKFD") creates, exports, sends
 *                                    the descriptor here, releases and exits; this process keeps
 *                                    the descriptor: the free memory, cuMemAlloc OTHER; closes
 *                                    it: the free memory, cuMemAlloc OTHER again
 *   vmmfds ops DEV OP...             OPs on four allocations (slot i: (i + 1) x 2 MiB), each
 *                                    "KIND SLOT": c create, e export (descriptor kept), i import
 *                                    through the slot's first kept descriptor, m map, u unmap
 *                                    the latest mapping, r release, x close the slot's kept
 *                                    descriptors; after each, "op CODE FREE" */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cudrv.h"

/* Each descriptor kept here keeps its allocation alive after its only handle was released. */
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
    int sock, status = 0;
    use_device(dev);
    pid_t pid = spawn_sender("vmmfds", "drop", dev, bytes, &sock);
    if (pid < 0)
        return 3;
    int fd = recv_fd(sock);
    waitpid(pid, &status, 0);
    printf("exporter %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    print_free("free_exporter_gone", dev);
    try_alloc("other", other);
    close(fd);
    print_free("free_closed", dev);
    try_alloc("other_after", other);
    return 0;
}

enum { SLOTS = 4, MAPS = 8, FDS = 8 };

typedef struct {
    Handle h;
    size_t bytes;
    CUdeviceptr va[MAPS];
    int maps, fds[FDS], nfds;
} slot;

/* One operation on slot `s`: the driver's code. */
static CUresult op(int dev, char kind, slot *s)
{
    AllocProp prop = {PINNED, POSIX_FD, {ON_DEVICE, dev}, NULL, {0}};
    AccessDesc access = {{ON_DEVICE, dev}, READ_WRITE};
    CUresult rc = 0;
    switch (kind) {
    case 'c':
        return cuMemCreate(&s->h, s->bytes, &prop, 0);
    case 'e':
        rc = s->nfds < FDS ? cuMemExportToShareableHandle(&s->fds[s->nfds], s->h, POSIX_FD, 0) : 1;
        s->nfds += rc == 0;
        return rc;
    case 'i':
        return s->nfds ? cuMemImportFromShareableHandle(&s->h, (void *)(intptr_t)s->fds[0], POSIX_FD)
                       : 1;
    case 'm':
        rc = s->maps < MAPS ? cuMemAddressReserve(&s->va[s->maps], s->bytes, 0, 0, 0) : 1;
        rc = rc ? rc : cuMemMap(s->va[s->maps], s->bytes, 0, s->h, 0);
        rc = rc ? rc : cuMemSetAccess(s->va[s->maps], s->bytes, &access, 1);
        s->maps += rc == 0;
        return rc;
    case 'u':
        rc = s->maps ? cuMemUnmap(s->va[s->maps - 1], s->bytes) : 1;
        s->maps -= rc == 0;
        return rc;
    case 'r':
        return cuMemRelease(s->h);
    case 'x':
        while (s->nfds)
            close(s->fds[--s->nfds]);
        return 0;
    }
    return 1;
}

static int ops(int dev, int n, char **args)
{
    slot slots[SLOTS];
    memset(slots, 0, sizeof slots);
    for (int i = 0; i < SLOTS; i++)
        slots[i].bytes = (size_t)(i + 1) * (2u << 20);
    use_device(dev);
    for (int i = 0; i < n; i++) {
        int k = args[i][1] - '0';
        CUresult rc = k >= 0 && k < SLOTS ? op(dev, args[i][0], &slots[k]) : 1;
        size_t free_b = 0, total = 0;
        cuMemGetInfo_v2(&free_b, &total);
        printf("op %d %zu\n", rc, free_b);
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3 || cuInit(0))
        return 2;
    if (!strcmp(argv[1], "ops"))
        return ops(atoi(argv[2]), argc - 3, argv + 3);
    if (!strcmp(argv[1], "keep") && argc == 5)
        return keep(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(argv[1], "drop") && argc == 5)
        return drop(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (!strcmp(argv[1], "handoff") && argc == 5)
        return handoff(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    fprintf(stderr, "vmmfds: bad arguments\n");
    return 2;
}
