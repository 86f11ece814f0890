/* Shared accounting region. Memory is reserved under the region's lock before the real allocation,
 * so concurrent allocations in any process of the container cannot both pass the check. Every
 * lock here is an open file description lock (F_OFD_SETLK) on bytes of `state`: the region's on
 * its first bytes, and each process's on its slot's bytes, so "the slot is live" means "its lock
 * is held". Such a lock belongs to the open file description, not to a pid or thread id, so it
 * means the same in every PID namespace (containers sharing a DRA claim each have their own pid
 * 1, and the same thread ids: a robust futex, which names its owner by thread id, would take a
 * killed waiter of one for the holder of the other), and the kernel releases it when the process
 * exits however it exits (SIGKILL included): a holder cannot wedge the others, and a slot whose
 * lock is free is given back, with no pid, /proc or kill() involved. */
#define _GNU_SOURCE /* F_OFD_SETLK, F_OFD_GETLK */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shared_file.h"

#define REGION_MAGIC "VGPUREG3" /* 3: the table of shared VMM allocations */
#define REGION_VERSION 3
#define ACTIVITY_MAGIC "VGPUACT2" /* 2: this library reads `scale` (README, the contract) */
#define ACTIVITY_BYTES (8 + 8 * VGPU_MAX_DEVICES)

static char state_path[256];
static int my_fd = -1; /* this process's own open file description of `state`: it holds the lock */
static pid_t my_pid;   /* the process that opened my_fd (a forked child shares its parent's) */
static int my_slot = -1;
static pthread_mutex_t threads = PTHREAD_MUTEX_INITIALIZER; /* the OFD lock is the process's */

static void drop_parents_fd(void)
{
    if (my_fd >= 0)
        close(my_fd); /* the parent's description stays open in the parent, its lock with it */
    my_fd = -1;
    my_slot = -1;
}

void vgpu_region_forget_self(void)
{
    drop_parents_fd();
    pthread_mutex_init(&threads, NULL); /* a thread of the parent may have held it */
}

/* This process's own description of `state`, opened again in a child that inherited its parent's
 * without the fork handler (a lock taken through the parent's would be the parent's). */
static int own_fd(void)
{
    pid_t pid = getpid();
    if (my_fd >= 0 && my_pid == pid)
        return my_fd;
    drop_parents_fd();
    my_fd = open(state_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    my_pid = pid;
    return my_fd;
}

static struct flock bytes_of(size_t start, size_t len, short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)start;
    fl.l_len = (off_t)len;
    return fl;
}

static struct flock slot_bytes(int slot, short type)
{
    size_t at = offsetof(vgpu_region, proc) + (size_t)slot * sizeof(vgpu_proc_slot);
    return bytes_of(at, sizeof(vgpu_proc_slot), type);
}

/* 1 while another open file description holds slot `slot`'s lock (or when it cannot be told:
 * an unknown slot stays counted, so an error never frees memory that is in use). */
static int held_by_another(int fd, int slot)
{
    struct flock fl = slot_bytes(slot, F_WRLCK);
    return fcntl(fd, F_OFD_GETLK, &fl) != 0 || fl.l_type != F_UNLCK;
}

/* The magic's bytes are the region's lock. Counters are single stores, so a holder killed midway
 * leaves them consistent. */
int vgpu_region_lock(void)
{
    pthread_mutex_lock(&threads);
    int fd = own_fd();
    struct flock fl = bytes_of(0, sizeof(REGION_MAGIC) - 1, F_WRLCK);
    int rc = -1;
    while (fd >= 0 && (rc = fcntl(fd, F_OFD_SETLKW, &fl)) != 0 && errno == EINTR) {
    }
    if (rc != 0)
        pthread_mutex_unlock(&threads);
    return rc;
}

void vgpu_region_unlock(void)
{
    struct flock fl = bytes_of(0, sizeof(REGION_MAGIC) - 1, F_UNLCK);
    fcntl(my_fd, F_OFD_SETLK, &fl);
    pthread_mutex_unlock(&threads);
}

/* How many slots a sum or reap reads: slots are taken lowest first, so a container's few
 * processes keep this small, and a reservation no longer reads all 1,024 slots. A forged value
 * only hides the container's own use from itself (bounded, never read past the table). */
static int slots_seen(const vgpu_region *r)
{
    uint32_t n = __atomic_load_n(&r->slots_seen, __ATOMIC_RELAXED);
    return n < VGPU_MAX_PROCS ? (int)n : VGPU_MAX_PROCS;
}

/* Drops the slots whose lock no process holds any more: their processes have exited; then the
 * shared allocations that only closed descriptors pinned. Only on the slow paths (a reservation
 * about to be refused, a query of the container's use), never on an allocation that fits. */
static void reap(vgpu_region *r)
{
    int fd = own_fd();
    if (fd < 0)
        return;
    for (int i = 0; i < slots_seen(r); i++)
        if (r->proc[i].claimed && i != my_slot && !held_by_another(fd, i)) {
            memset(&r->proc[i], 0, sizeof r->proc[i]);
            vgpu_shares_drop_slot(r, i);
        }
    uint64_t state[2]; /* the region's lock, held now, is on this file: the list must show it */
    if (vgpu_region_identity(state) == 0)
        vgpu_shares_check_pins(r, state);
}

int vgpu_region_identity(uint64_t id[2])
{
    struct stat st;
    int fd = own_fd();
    if (fd < 0 || fstat(fd, &st) != 0)
        return -1;
    id[0] = (uint64_t)st.st_dev;
    id[1] = (uint64_t)st.st_ino;
    return 0;
}

/* This process's slot: the first whose lock it can take (one free, or left by an exited process,
 * whose counts are dropped with it). Called under the region's lock, so no reap runs meanwhile. */
static int claim_slot(vgpu_region *r)
{
    int fd = own_fd();
    if (fd < 0 || my_slot >= 0)
        return fd < 0 ? -1 : my_slot;
    for (int i = 0; i < VGPU_MAX_PROCS; i++) {
        struct flock fl = slot_bytes(i, F_WRLCK);
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
            memset(&r->proc[i], 0, sizeof r->proc[i]);
            vgpu_shares_drop_slot(r, i); /* what an exited process held there is not ours */
            r->proc[i].claimed = 1;
            if ((uint32_t)i >= r->slots_seen)
                __atomic_store_n(&r->slots_seen, (uint32_t)i + 1, __ATOMIC_RELAXED);
            __atomic_store_n(&my_slot, i, __ATOMIC_RELEASE);
            break;
        }
    }
    return my_slot;
}

/* Saturates: counters are in a file any process of the container can write. */
static uint64_t sum_used(vgpu_region *r, int dev)
{
    uint64_t total = 0;
    for (int i = 0; i < slots_seen(r); i++) {
        uint64_t *counter = &r->proc[i].used[dev];
        uint64_t used = r->proc[i].claimed ? __atomic_load_n(counter, __ATOMIC_RELAXED) : 0;
        total = total + used < total ? UINT64_MAX : total + used;
    }
    uint64_t shared = vgpu_shares_used(r, dev);
    return total + shared < total ? UINT64_MAX : total + shared;
}

int vgpu_region_slot(vgpu_region *r)
{
    return claim_slot(r);
}

int vgpu_region_reserve(vgpu_region *r, int dev, uint64_t bytes, uint64_t limit)
{
    int ok = -1;
    if (vgpu_region_lock() != 0)
        return -1; /* fail closed: nothing is granted that could not be counted */
    int slot = claim_slot(r);
    if (slot >= 0) {
        uint64_t used = sum_used(r, dev);
        if (used + bytes > limit || used + bytes < used) {
            reap(r);
            used = sum_used(r, dev);
        }
        if (used + bytes <= limit && used + bytes >= used) {
            __atomic_fetch_add(&r->proc[slot].used[dev], bytes, __ATOMIC_RELAXED);
            ok = 0;
        }
    }
    vgpu_region_unlock();
    return ok;
}

/* Without the region's lock: only this process changes its own slot's counters (atomically, as its
 * threads may), and a count that drops only makes a concurrent check stricter. A process with no
 * slot of its own (a child forked past the fork handler) has reserved nothing. */
void vgpu_region_release(vgpu_region *r, int dev, uint64_t bytes)
{
    int slot = __atomic_load_n(&my_slot, __ATOMIC_ACQUIRE);
    if (slot < 0 || my_pid != getpid())
        return;
    uint64_t *used = &r->proc[slot].used[dev];
    uint64_t old = __atomic_load_n(used, __ATOMIC_RELAXED), left;
    do {
        left = old > bytes ? old - bytes : 0;
    } while (!__atomic_compare_exchange_n(used, &old, left, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

uint64_t vgpu_region_used(vgpu_region *r, int dev)
{
    if (vgpu_region_lock() != 0)
        return UINT64_MAX; /* reported as none free */
    reap(r);
    uint64_t used = sum_used(r, dev);
    vgpu_region_unlock();
    return used;
}

static int init_region(void *p)
{
    vgpu_region *r = p;
    memset((char *)r + 8, 0, sizeof *r - 8);
    r->version = REGION_VERSION;
    r->size = (uint32_t)sizeof *r;
    return 0;
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
    vgpu_region *r = vgpu_map_shared(dir, "state", sizeof(vgpu_region), REGION_MAGIC, init_region,
                                     &fd, err, errlen);
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
    char *a = vgpu_map_shared(dir, "activity", ACTIVITY_BYTES, ACTIVITY_MAGIC, init_activity, NULL,
                              err, errlen);
    if (!a)
        return -1;
    *region = r;
    *activity = (uint64_t *)(void *)(a + 8);
    return 0;
}
