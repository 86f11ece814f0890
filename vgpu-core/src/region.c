/* Shared accounting region. Memory is reserved under a robust process-shared mutex before the real
 * allocation, so concurrent allocations in any process of the container cannot both pass the
 * check. A process owns its slot by an open file description lock (F_OFD_SETLK) on the slot's
 * bytes of `state`, and "the slot is live" means "its lock is held". Such a lock belongs to the
 * open file description, not to a pid, so it means the same in every PID namespace (containers
 * sharing a DRA claim each have their own pid 1), and the kernel releases it when the process
 * exits however it exits (SIGKILL included): a slot whose lock is free is given back, with no pid,
 * /proc or kill() involved. Slots no one holds are dropped before a reservation is refused. */
#define _GNU_SOURCE /* F_OFD_SETLK, F_OFD_GETLK */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define REGION_MAGIC "VGPUREG2"
#define REGION_VERSION 2
#define ACTIVITY_MAGIC "VGPUACT1"
#define ACTIVITY_BYTES (8 + 8 * VGPU_MAX_DEVICES)
#define SHARED_MODE 0666 /* every user of the container shares the files, whatever the umask */

static char state_path[256];
static int my_fd = -1; /* this process's own open file description of `state`: it holds the lock */
static pid_t my_pid;   /* the process that opened my_fd (a forked child shares its parent's) */
static int my_slot = -1;

void vgpu_region_forget_self(void)
{
    if (my_fd >= 0)
        close(my_fd); /* the parent's description stays open in the parent, its lock with it */
    my_fd = -1;
    my_slot = -1;
}

/* This process's own description of `state`, opened again in a child that inherited its parent's
 * without the fork handler (a lock taken through the parent's would be the parent's). */
static int own_fd(void)
{
    pid_t pid = getpid();
    if (my_fd >= 0 && my_pid == pid)
        return my_fd;
    vgpu_region_forget_self();
    my_fd = open(state_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    my_pid = pid;
    return my_fd;
}

static struct flock slot_bytes(int slot, short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)(offsetof(vgpu_region, proc) + (size_t)slot * sizeof(vgpu_proc_slot));
    fl.l_len = (off_t)sizeof(vgpu_proc_slot);
    return fl;
}

/* 1 while another open file description holds slot `slot`'s lock (or when it cannot be told:
 * an unknown slot stays counted, so an error never frees memory that is in use). */
static int held_by_another(int fd, int slot)
{
    struct flock fl = slot_bytes(slot, F_WRLCK);
    return fcntl(fd, F_OFD_GETLK, &fl) != 0 || fl.l_type != F_UNLCK;
}

void vgpu_region_lock(vgpu_region *r)
{
    if (pthread_mutex_lock(&r->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&r->lock); /* counters are single stores: still consistent */
}

void vgpu_region_unlock(vgpu_region *r)
{
    pthread_mutex_unlock(&r->lock);
}

/* Drops the slots whose lock no process holds any more: their processes have exited. */
static void reap(vgpu_region *r)
{
    int fd = own_fd();
    if (fd < 0)
        return;
    for (int i = 0; i < VGPU_MAX_PROCS; i++)
        if (r->proc[i].claimed && i != my_slot && !held_by_another(fd, i))
            memset(&r->proc[i], 0, sizeof r->proc[i]);
}

/* This process's slot: the first whose lock it can take (one free, or left by an exited process,
 * whose counts are dropped with it). Called under the mutex, so no reap runs meanwhile. */
static int claim_slot(vgpu_region *r)
{
    int fd = own_fd();
    if (fd < 0 || my_slot >= 0)
        return fd < 0 ? -1 : my_slot;
    for (int i = 0; i < VGPU_MAX_PROCS; i++) {
        struct flock fl = slot_bytes(i, F_WRLCK);
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
            memset(&r->proc[i], 0, sizeof r->proc[i]);
            r->proc[i].claimed = 1;
            my_slot = i;
            break;
        }
    }
    return my_slot;
}

/* Saturates: counters are in a file any process of the container can write. */
static uint64_t sum_used(vgpu_region *r, int dev)
{
    uint64_t total = 0;
    for (int i = 0; i < VGPU_MAX_PROCS; i++) {
        uint64_t used = r->proc[i].claimed ? r->proc[i].used[dev] : 0;
        total = total + used < total ? UINT64_MAX : total + used;
    }
    return total;
}

int vgpu_region_reserve(vgpu_region *r, int dev, uint64_t bytes, uint64_t limit)
{
    int ok = -1;
    vgpu_region_lock(r);
    int slot = claim_slot(r);
    if (slot >= 0) {
        uint64_t used = sum_used(r, dev);
        if (used + bytes > limit || used + bytes < used) {
            reap(r);
            used = sum_used(r, dev);
        }
        if (used + bytes <= limit && used + bytes >= used) {
            r->proc[slot].used[dev] += bytes;
            ok = 0;
        }
    }
    vgpu_region_unlock(r);
    return ok;
}

void vgpu_region_release(vgpu_region *r, int dev, uint64_t bytes)
{
    vgpu_region_lock(r);
    int slot = claim_slot(r);
    if (slot >= 0) {
        uint64_t *used = &r->proc[slot].used[dev];
        *used = *used > bytes ? *used - bytes : 0;
    }
    vgpu_region_unlock(r);
}

uint64_t vgpu_region_used(vgpu_region *r, int dev)
{
    vgpu_region_lock(r);
    reap(r);
    uint64_t used = sum_used(r, dev);
    vgpu_region_unlock(r);
    return used;
}

static int init_mutex(pthread_mutex_t *m)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(m, &attr);
    pthread_mutexattr_destroy(&attr);
    return rc;
}

/* Fills in a file no process has initialised yet: all zero (a file of another layout or version,
 * whose magic is not ours, is refused, never overwritten under processes still using it). */
static int init_if_blank(void *map, const char *magic, int (*init)(void *))
{
    static const char blank[8];
    if (memcmp(map, magic, 8) == 0)
        return 0;
    if (memcmp(map, blank, 8) != 0 || init(map) != 0)
        return -1;
    memcpy(map, magic, 8);
    return 0;
}

/* Under the flock: the file made usable by every user of the container whatever the creating
 * process's umask (a root entrypoint may create it before the application runs as another uid),
 * sized, mapped and initialised once. NULL with *problem on failure. */
static void *map_locked(int fd, size_t size, const char *magic, int (*init)(void *),
                        const char **problem)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_uid == geteuid() && (st.st_mode & 0777) != SHARED_MODE &&
                                fchmod(fd, SHARED_MODE) != 0)) {
        *problem = strerror(errno);
        return NULL;
    }
    if (st.st_size != 0 && (size_t)st.st_size != size) {
        *problem = "it has an unknown layout";
        return NULL;
    }
    if (st.st_size == 0 && ftruncate(fd, (off_t)size) != 0) {
        *problem = strerror(errno);
        return NULL;
    }
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        *problem = strerror(errno);
        return NULL;
    }
    if (init_if_blank(map, magic, init) != 0) {
        *problem = "it has an unknown layout";
        munmap(map, size);
        return NULL;
    }
    return map;
}

/* Opens dir/name, sized `size`, and maps it, initialised; on success the descriptor is left in
 * *keep when keep is not NULL. */
static void *map_file(const char *dir, const char *name, size_t size, const char *magic,
                      int (*init)(void *), int *keep, char *err, size_t errlen)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, SHARED_MODE);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open %s: %s%s", path, strerror(e),
                 e == EACCES ? " (it must be writable by every user of the container)" : "");
        return NULL;
    }
    const char *problem = NULL;
    void *map = NULL;
    if (flock(fd, LOCK_EX) != 0)
        problem = strerror(errno);
    else
        map = map_locked(fd, size, magic, init, &problem);
    flock(fd, LOCK_UN);
    if (!map)
        snprintf(err, errlen, "cannot map %s: %s", path, problem);
    if (map && keep)
        *keep = fd;
    else
        close(fd);
    return map;
}

static int init_region(void *p)
{
    vgpu_region *r = p;
    memset((char *)r + 8, 0, sizeof *r - 8);
    r->version = REGION_VERSION;
    r->size = (uint32_t)sizeof *r;
    return init_mutex(&r->lock);
}

static int init_activity(void *p)
{
    memset((char *)p + 8, 0, ACTIVITY_BYTES - 8);
    return 0;
}

/* The lock a slot is owned by must work here, or no process could ever take a slot. */
static int check_locks(int fd, const char *dir, char *err, size_t errlen)
{
    struct flock probe = slot_bytes(0, F_WRLCK);
    if (fcntl(fd, F_OFD_GETLK, &probe) == 0)
        return 0;
    snprintf(err, errlen, "cannot lock %s/state: %s (open file description locks need Linux 3.15)",
             dir, strerror(errno));
    return -1;
}

int vgpu_region_open(const char *dir, vgpu_region **region, uint64_t **activity, char *err,
                     size_t errlen)
{
    int fd = -1;
    vgpu_region *r = map_file(dir, "state", sizeof(vgpu_region), REGION_MAGIC, init_region, &fd,
                              err, errlen);
    if (!r)
        return -1;
    if (r->version != REGION_VERSION || r->size != sizeof *r) {
        snprintf(err, errlen, "%s/state has an unknown layout", dir);
        close(fd);
        return -1;
    }
    if (check_locks(fd, dir, err, errlen) != 0) {
        close(fd);
        return -1;
    }
    snprintf(state_path, sizeof state_path, "%s/state", dir);
    my_fd = fd; /* kept: it is the description whose lock will be this process's slot */
    my_pid = getpid();
    char *a = map_file(dir, "activity", ACTIVITY_BYTES, ACTIVITY_MAGIC, init_activity, NULL, err,
                       errlen);
    if (!a)
        return -1;
    *region = r;
    *activity = (uint64_t *)(void *)(a + 8);
    return 0;
}
