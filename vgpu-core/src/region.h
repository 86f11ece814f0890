/* The container's shared state: memory in use per process and GPU, and the cores budget per GPU.
 * It lives in a file under the read-write shared directory the agent mounts, mapped by every
 * process of the container (whatever its user or PID namespace: containers sharing a DRA claim
 * share the directory), so the container is held to its grant as a whole. */
#ifndef VGPU_REGION_H
#define VGPU_REGION_H

#include <stdint.h>
#include <sys/types.h>

#include "limits.h"

#define VGPU_MAX_PROCS 1024

/* A process's slot. It is taken by an open file description lock on the slot's bytes of the file
 * and lives exactly as long as that lock: no pid, which means nothing across PID namespaces. */
typedef struct {
    uint64_t claimed; /* nonzero once taken; counted until a check finds its lock released */
    uint64_t used[VGPU_MAX_DEVICES];
} vgpu_proc_slot;

typedef struct {
    int64_t budget_ns; /* busy time the container may still start this period; may go negative */
    int32_t allowance; /* percent, as last read from `limits` */
    int32_t pad;
} vgpu_dev_slot;

#define VGPU_MAX_SHARED 64
#define VGPU_SHARED_IDS 4

/* A VMM allocation shared among the container's processes (exported as a file descriptor, then
 * imported): counted once, on its device, while any live process of the container holds it. */
typedef struct {
    uint64_t bytes; /* 0: entry free */
    uint32_t index; /* the allocation's device (limits index) */
    uint32_t pad;
    uint64_t id[VGPU_SHARED_IDS][2];      /* (st_dev, st_ino) of the files it was exported as */
    uint64_t holders[VGPU_MAX_PROCS / 64]; /* slots holding a handle or mapping of it */
} vgpu_shared;

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t size;
    uint64_t next_refill_ns; /* read and written with __atomic builtins */
    uint32_t slots_seen; /* 1 + the highest slot ever taken: sums and reaps stop there */
    uint32_t pad;
    vgpu_dev_slot dev[VGPU_MAX_DEVICES];
    vgpu_proc_slot proc[VGPU_MAX_PROCS];
    vgpu_shared shared[VGPU_MAX_SHARED];
} vgpu_region;

/* Maps (creating it if needed) the region and the activity file; -1 with a reason on failure. */
int vgpu_region_open(const char *dir, vgpu_region **region, uint64_t **activity, char *err,
                     size_t errlen);

/* The region's lock, among processes and among this process's threads: 0, or -1 when it cannot
 * be taken (this process cannot open `state` again: what depends on it fails closed). */
int vgpu_region_lock(void);
void vgpu_region_unlock(void);

/* Adds `bytes` to this process's use of device `dev` if the container stays within `limit`;
 * returns 0, or -1 when it would not (nothing changed). */
int vgpu_region_reserve(vgpu_region *r, int dev, uint64_t bytes, uint64_t limit);

/* Gives back `bytes` of this process's use of device `dev`. */
void vgpu_region_release(vgpu_region *r, int dev, uint64_t bytes);

/* The container's total use of device `dev` (live processes only). */
uint64_t vgpu_region_used(vgpu_region *r, int dev);

/* This process's slot, taken if it has none: -1 when none can be (under the region's lock). */
int vgpu_region_slot(vgpu_region *r);

/* Forgets this process's slot and closes its copy of the parent's descriptor (in a forked child,
 * which holds none of its parent's memory); the child takes a slot of its own when it allocates. */
void vgpu_region_forget_self(void);

#endif
