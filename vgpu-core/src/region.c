/* Shared accounting region. Memory is reserved under a robust process-shared mutex before the real
 * allocation, so concurrent allocations in any process of the container cannot both pass the
 * check; slots of processes that died are dropped before a reservation is refused. */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define REGION_MAGIC "VGPUREG1"
#define ACTIVITY_MAGIC "VGPUACT2" /* 2: this library reads `scale` (README, the contract) */
#define ACTIVITY_BYTES (8 + 8 * VGPU_MAX_DEVICES)

static int my_slot = -1;
static pid_t my_pid;

void vgpu_region_forget_self(void)
{
    my_slot = -1;
}

/* The start time of a live process (0 when it is gone or a zombie: a killed process whose parent
 * has not reaped it holds no GPU memory any more, but kill(pid, 0) still succeeds). */
static uint64_t proc_starttime(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces; fields follow the last ')' */
    unsigned long long start = 0;
    char state = 0;
    if (!p || sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &state, &start) != 2)
        return 0;
    return state == 'Z' || state == 'X' ? 0 : start;
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

/* Drops slots of processes that are gone; `thorough` also catches a pid reused by another process. */
static void reap(vgpu_region *r, int thorough)
{
    for (int i = 0; i < VGPU_MAX_PROCS; i++) {
        vgpu_proc_slot *s = &r->proc[i];
        if (s->pid == 0 || i == my_slot)
            continue;
        int dead = kill(s->pid, 0) < 0 && errno == ESRCH;
        if (!dead && thorough) /* a zombie, or the pid now names another process */
            dead = proc_starttime(s->pid) != s->starttime;
        if (dead)
            memset(s, 0, sizeof *s);
    }
}

static int claim_slot(vgpu_region *r)
{
    pid_t pid = getpid();
    if (my_slot >= 0 && my_pid == pid)
        return my_slot;
    reap(r, 0);
    int free_slot = -1;
    for (int i = 0; i < VGPU_MAX_PROCS; i++) {
        if (r->proc[i].pid == pid) /* a slot left by an earlier process with our pid */
            memset(&r->proc[i], 0, sizeof r->proc[i]);
        if (r->proc[i].pid == 0 && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0)
        return -1;
    r->proc[free_slot].pid = pid;
    r->proc[free_slot].starttime = proc_starttime(pid);
    my_slot = free_slot;
    my_pid = pid;
    return my_slot;
}

static uint64_t sum_used(vgpu_region *r, int dev)
{
    uint64_t total = 0;
    for (int i = 0; i < VGPU_MAX_PROCS; i++)
        if (r->proc[i].pid != 0)
            total += r->proc[i].used[dev];
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
            reap(r, 1);
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
    reap(r, 0);
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

/* Opens dir/name, sized `size`, and maps it; runs `init` once, serialised by flock. */
static void *map_file(const char *dir, const char *name, size_t size, const char *magic,
                      int (*init)(void *), char *err, size_t errlen)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    void *map = MAP_FAILED;
    struct stat st;
    if (flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0 &&
        ((size_t)st.st_size >= size || ftruncate(fd, (off_t)size) == 0))
        map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
    } else if (memcmp(map, magic, 8) != 0) {
        if ((size_t)st.st_size != 0 && (size_t)st.st_size != size) {
            snprintf(err, errlen, "%s has an unknown layout", path);
            munmap(map, size);
            map = MAP_FAILED;
        } else if (init(map) != 0) {
            snprintf(err, errlen, "cannot initialise %s", path);
            munmap(map, size);
            map = MAP_FAILED;
        } else {
            memcpy(map, magic, 8);
        }
    }
    flock(fd, LOCK_UN);
    close(fd);
    return map == MAP_FAILED ? NULL : map;
}

static int init_region(void *p)
{
    vgpu_region *r = p;
    memset((char *)r + 8, 0, sizeof *r - 8);
    r->version = 1;
    r->size = (uint32_t)sizeof *r;
    return init_mutex(&r->lock);
}

static int init_activity(void *p)
{
    memset((char *)p + 8, 0, ACTIVITY_BYTES - 8);
    return 0;
}

int vgpu_region_open(const char *dir, vgpu_region **region, uint64_t **activity, char *err,
                     size_t errlen)
{
    vgpu_region *r = map_file(dir, "state", sizeof(vgpu_region), REGION_MAGIC, init_region, err,
                              errlen);
    if (!r)
        return -1;
    if (r->version != 1 || r->size != sizeof *r) {
        snprintf(err, errlen, "%s/state has an unknown layout", dir);
        return -1;
    }
    char *a = map_file(dir, "activity", ACTIVITY_BYTES, ACTIVITY_MAGIC, init_activity, err, errlen);
    if (!a)
        return -1;
    *region = r;
    *activity = (uint64_t *)(void *)(a + 8);
    return 0;
}
