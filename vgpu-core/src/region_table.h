/* The layout of the container's shared `state` file, and the reads of its table of shared
 * allocations that the region's own sums and reaps need. Kept below region.c and shares.c, which
 * both use it, so neither calls the other back. */
#ifndef VGPU_REGION_TABLE_H
#define VGPU_REGION_TABLE_H

#include <stdint.h>

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
 * imported): counted once, on its device, while any live process of the container holds it, or
 * while a descriptor it was exported as is still open anywhere (pinned: pins.h). */
typedef struct {
    uint64_t bytes;  /* 0: entry free */
    uint32_t index;  /* the allocation's device (limits index) */
    uint32_t pinned; /* 1: exported as files whose open descriptors keep it alive (pins.h) */
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

/* 1 while a process whose slot is live holds shared entry `e`. */
int vgpu_shared_live(const vgpu_region *r, const vgpu_shared *e);

/* 1 while shared entry `e` counts: a live process holds it, or it is pinned (a descriptor it was
 * exported as may still be open: only vgpu_shares_check_pins finds out that none is). */
int vgpu_shared_counted(const vgpu_region *r, const vgpu_shared *e);

/* Frees the pinned entries no live process holds whose exported descriptors are all closed
 * (under the region's lock, which is an open file description lock on the file `state`, the
 * identity given: the kernel's list of locks must show it; reads /proc/locks only when there is
 * such an entry, and frees nothing when it cannot be told). */
void vgpu_shares_check_pins(vgpu_region *r, const uint64_t state[2]);

/* Forgets the files shared entry `e` was exported as whose descriptors are all closed, making
 * room for more (as vgpu_shares_check_pins; nothing is forgotten when it cannot be told). */
void vgpu_shares_prune(vgpu_shared *e, const uint64_t state[2]);

/* What the live shared entries of device `dev` count, saturating (under the region's lock). */
uint64_t vgpu_shares_used(const vgpu_region *r, int dev);

/* Slot `slot` holds nothing any more (its process exited, or the slot is taken afresh). */
void vgpu_shares_drop_slot(vgpu_region *r, int slot);

#endif
