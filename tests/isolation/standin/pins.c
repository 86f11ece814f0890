/* The stand-in driver's exported VMM descriptors, as references to their memory.
 *
 * CUDA Driver API reference, cuMemRelease: the allocation "will be freed when all outstanding
 * mappings to the memory are unmapped and when all outstanding references to the handle
 * (including its shareable counterparts) are also released"; an exported POSIX file descriptor
 * is such a counterpart, and NVIDIA's cuda.core (VirtualMemoryResource) says the same of it: "A
 * POSIX fd descriptor pins the physical memory while it exists; release it when the receiver has
 * imported it." So memory no process holds by a handle or mapping stays allocated while any
 * process still has one of its exported files open, and is freed at the last close.
 *
 * Each export is a file of its own next to the state file, opened afresh (an open file
 * description of its own), whose description takes an open file description lock on one byte:
 * the kernel drops that lock exactly when the description's last reference goes (every copy of
 * the descriptor closed, in any process, however it was passed: inherited, or over a UNIX
 * socket, even while in flight), which is when the real driver's file is released. Whether an
 * export is still open is then asked of the kernel through a new description of the same file.
 * Called under the state lock (si_lock). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "standin.h"

#define SI_PIN_AT (1 << 20) /* the byte an export's description locks, past its record */

static void export_path(const struct si_node *n, uint64_t ptr, int k, char *out, size_t len) {
    snprintf(out, len, "%s.vmm-%llx-%d", n->cfg.state_path, (unsigned long long)ptr, k);
}

static struct flock pin_byte(short type) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = SI_PIN_AT;
    fl.l_len = 1;
    return fl;
}

int si_export_open(struct si_node *n, uint64_t ptr, const void *rec, size_t len) {
    struct si_alloc *a = NULL;
    char path[300];
    for (int i = 0; !a && i < SI_MAX_ALLOCS; i++)
        a = n->sh->alloc[i].kind == SI_VMM && n->sh->alloc[i].ptr == ptr ? &n->sh->alloc[i] : NULL;
    if (!a)
        return -1;
    export_path(n, ptr, a->pad, path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600); /* not O_CLOEXEC: as a driver's */
    struct flock fl = pin_byte(F_RDLCK);
    if (fd >= 0 && (pwrite(fd, rec, len, 0) != (ssize_t)len || fcntl(fd, F_OFD_SETLK, &fl))) {
        close(fd);
        unlink(path);
        return -1;
    }
    a->pad += fd >= 0; /* how many files it was exported as */
    return fd;
}

int si_exports_open(struct si_node *n, const struct si_alloc *a) {
    char path[300];
    int open_somewhere = 0;
    for (int k = 0; !open_somewhere && k < a->pad; k++) {
        export_path(n, a->ptr, k, path, sizeof path);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct flock fl = pin_byte(F_WRLCK);
        open_somewhere = fd >= 0 && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
        if (fd >= 0)
            close(fd);
    }
    return open_somewhere;
}

void si_exports_remove(struct si_node *n, const struct si_alloc *a) {
    char path[300];
    for (int k = 0; k < a->pad; k++) {
        export_path(n, a->ptr, k, path, sizeof path);
        unlink(path);
    }
}

/* Frees the memory only its exported descriptors held, once none of them is open any more. */
void si_exports_reap(struct si_node *n) {
    struct si_shared *sh = n->sh;
    for (int i = 0; sh->exported > 0 && i < SI_MAX_ALLOCS; i++) {
        struct si_alloc *a = &sh->alloc[i];
        if (a->kind != SI_EXPORTED || si_exports_open(n, a))
            continue;
        si_exports_remove(n, a);
        sh->gpu[a->gpu].used -= a->bytes;
        memset(a, 0, sizeof(*a));
        sh->exported--;
    }
}
