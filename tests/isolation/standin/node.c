/* The process's view of the node: the config, and the state file mapped shared.
 *
 * Liveness without pids: each process that takes memory or time claims a slot and holds an
 * open-file-description lock on one byte of the state file for it. The kernel drops that lock
 * when the process exits or is SIGKILLed, in any pid namespace, so `si_reap` can give back a dead
 * process's memory the way the real driver does when a process goes away. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "standin.h"

#define SI_MAGIC 0x76677075534e3032ull /* "vgpuSN02" */
#define SI_LOCK_BASE (1ll << 30)

static struct si_node node;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[512];
static int loaded;
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static int lock_fd = -1; /* the OFD that holds this process's slot lock */

uint64_t si_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void si_sleep_until(uint64_t ns) {
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void init_shared(struct si_shared *sh) {
    pthread_mutexattr_t a;
    memset(sh, 0, sizeof(*sh));
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&sh->lock, &a);
    pthread_mutexattr_destroy(&a);
    for (int g = 0; g < SI_MAX_GPUS; g++)
        sh->gpu[g].next_va = 0x700000000000ull + ((uint64_t)g << 40);
    __atomic_store_n(&sh->magic, SI_MAGIC, __ATOMIC_RELEASE);
}

static int map_state(void) {
    int fd = open(node.cfg.state_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(load_err, sizeof(load_err), "vgpu-standin: cannot open state file %s: %s",
                 node.cfg.state_path, strerror(errno));
        return -1;
    }
    flock(fd, LOCK_EX); /* one process initialises the file */
    struct stat st;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size < sizeof(struct si_shared))
        if (ftruncate(fd, sizeof(struct si_shared)) != 0)
            st.st_size = -1;
    void *p = mmap(NULL, sizeof(struct si_shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || st.st_size < 0) {
        flock(fd, LOCK_UN);
        close(fd);
        snprintf(load_err, sizeof(load_err), "vgpu-standin: cannot map %s", node.cfg.state_path);
        return -1;
    }
    node.sh = p;
    if (__atomic_load_n(&node.sh->magic, __ATOMIC_ACQUIRE) != SI_MAGIC)
        init_shared(node.sh);
    flock(fd, LOCK_UN);
    node.fd = fd;
    return 0;
}

static void load(void) {
    node.slot = -1;
    if (si_config_load(&node.cfg, load_err, sizeof(load_err)) != 0 || map_state() != 0)
        return;
    loaded = 1;
}

struct si_node *si_node(char *err, size_t errlen) {
    pthread_once(&once, load);
    if (!loaded) {
        if (err)
            snprintf(err, errlen, "%s", load_err);
        return NULL;
    }
    return &node;
}

/* The counts of exported and hold records, from the records themselves. */
static void recount(struct si_shared *sh) {
    sh->exported = sh->holds = 0;
    for (int i = 0; i < SI_MAX_ALLOCS; i++) {
        sh->exported += sh->alloc[i].kind == SI_EXPORTED;
        sh->holds += sh->alloc[i].kind == SI_HOLD;
    }
}

struct si_shared *si_lock(struct si_node *n) {
    int rc = pthread_mutex_lock(&n->sh->lock);
    if (rc == EOWNERDEAD) { /* the holder was killed; the data it guarded is still consistent
                               enough for a simulation: every update is a few stores */
        pthread_mutex_consistent(&n->sh->lock);
        recount(n->sh); /* but a count may have missed its record's last store */
    }
    si_reap(n);
    return n->sh;
}

void si_unlock(struct si_node *n) { pthread_mutex_unlock(&n->sh->lock); }

static int lock_byte(int fd, int slot, short type, int cmd) {
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = SI_LOCK_BASE + slot,
                       .l_len = 1};
    if (fcntl(fd, cmd, &fl) != 0)
        return -1;
    return cmd == F_OFD_GETLK ? fl.l_type : 0;
}

/* 1 if the process holding `slot` is alive (another OFD holds its byte). */
static int slot_alive(struct si_node *n, int slot) {
    return lock_byte(n->fd, slot, F_WRLCK, F_OFD_GETLK) != F_UNLCK;
}

static void raise_top(int32_t *top, int32_t to) {
    int32_t was = __atomic_load_n(top, __ATOMIC_RELAXED);
    while (was < to &&
           !__atomic_compare_exchange_n(top, &was, to, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

/* Knob: VGPU_STANDIN_CONTEXT in the environment names the kind of context the process holds
 * its device memory through: unset or "compute", a CUDA context (NVML lists the process with
 * nvmlDeviceGetComputeRunningProcesses); "graphics", a graphics context such as an OpenGL or
 * Vulkan program's, which needs no libcuda (listed with nvmlDeviceGetGraphicsRunningProcesses
 * only: of the compute list, the NVML API reference says "Any graphics applications (e.g. using
 * OpenGL, DirectX) won't be listed by this function"); "compute+graphics", both contexts (listed
 * in both lists). The stand-in still takes the memory through
 * its libcuda entry points (cuprobe's steps): only the kind NVML reports changes. */
static int32_t context_kinds(void) {
    const char *kind = getenv("VGPU_STANDIN_CONTEXT");
    if (kind && strcmp(kind, "graphics") == 0)
        return SI_CTX_GRAPHICS;
    if (kind && strcmp(kind, "compute+graphics") == 0)
        return SI_CTX_COMPUTE | SI_CTX_GRAPHICS;
    return SI_CTX_COMPUTE;
}

int si_register(struct si_node *n) {
    pthread_mutex_lock(&slot_mu);
    if (n->slot >= 0 && n->pid != getpid()) { /* forked child: the slot is the parent's */
        n->slot = -1;
        lock_fd = -1; /* shared with the parent; keep it open, it is theirs too */
    }
    if (n->slot < 0) {
        if (lock_fd < 0)
            lock_fd = open(n->cfg.state_path, O_RDWR | O_CLOEXEC);
        for (int s = 0; lock_fd >= 0 && s < SI_MAX_PROCS; s++) {
            if (n->sh->proc[s].pid != 0 || lock_byte(lock_fd, s, F_WRLCK, F_OFD_SETLK) != 0)
                continue;
            memset(&n->sh->proc[s], 0, sizeof(n->sh->proc[s]));
            n->sh->proc[s].pid = getpid();
            n->sh->proc[s].contexts = context_kinds();
            si_cgroup_self(n->sh->proc[s].cgroup, sizeof(n->sh->proc[s].cgroup));
            n->slot = s;
            n->pid = getpid();
            raise_top(&n->sh->proc_top, s + 1); /* registering may run outside the lock */
            break;
        }
    }
    pthread_mutex_unlock(&slot_mu);
    return n->slot;
}

/* Gives back what exited processes held. Their holds on shared memory go first, so shared memory
 * a dead process was charged with passes only to a live holder (pool.c, si_mem_hand_over). */
void si_reap(struct si_node *n) {
    struct si_shared *sh = n->sh;
    char dead[SI_MAX_PROCS] = {0};
    int any = 0;
    int32_t top = __atomic_load_n(&sh->proc_top, __ATOMIC_ACQUIRE);
    top = top < SI_MAX_PROCS ? top : SI_MAX_PROCS;
    for (int s = 0; s < top; s++) {
        dead[s] = sh->proc[s].pid != 0 && !(s == n->slot && n->pid == getpid()) &&
                  !slot_alive(n, s);
        any |= dead[s];
    }
    for (int i = 0; any && i < SI_MAX_ALLOCS; i++) {
        struct si_alloc *a = &sh->alloc[i];
        if (a->kind == SI_HOLD && dead[a->proc]) {
            memset(a, 0, sizeof(*a));
            sh->holds--;
        }
    }
    for (int i = 0; any && i < SI_MAX_ALLOCS; i++) { /* nobody died: nothing to give back */
        struct si_alloc *a = &sh->alloc[i];
        if (a->kind == SI_EXPORTED) {
            continue; /* no process's: freed at its descriptors' last close (si_exports_reap) */
        } else if ((a->kind == SI_VMM || a->kind == SI_MEM) && dead[a->proc]) {
            si_mem_hand_over(n, a);
        } else if (a->kind != SI_FREE && dead[a->proc]) {
            sh->gpu[a->gpu].used -= a->bytes;
            memset(a, 0, sizeof(*a));
        }
    }
    for (int s = 0; s < top; s++)
        if (dead[s])
            memset(&sh->proc[s], 0, sizeof(sh->proc[s]));
    si_exports_reap(n);
}
