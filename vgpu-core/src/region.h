/* The container's shared state: memory in use per process and GPU, and the cores budget per GPU.
 * It lives in a file under the read-write shared directory the agent mounts, mapped by every
 * process of the container (whatever its user or PID namespace: containers sharing a DRA claim
 * share the directory), so the container is held to its grant as a whole. */
#ifndef VGPU_REGION_H
#define VGPU_REGION_H

#include <stdint.h>
#include <sys/types.h>

#include "region_table.h"


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

/* The identity (device, inode) of `state`, whose bytes the region's lock is on: 0, or -1. */
int vgpu_region_identity(uint64_t id[2]);

/* This process's slot, taken if it has none: -1 when none can be (under the region's lock). */
int vgpu_region_slot(vgpu_region *r);

/* Forgets this process's slot and closes its copy of the parent's descriptor (in a forked child,
 * which holds none of its parent's memory); the child takes a slot of its own when it allocates. */
void vgpu_region_forget_self(void);

#endif
