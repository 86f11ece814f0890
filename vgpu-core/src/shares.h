/* VMM allocations shared among a container's processes, in the region's table of shared entries
 * (vmm.c decides what is shared; this file keeps the table). An entry is known by the identity of
 * the files the allocation was exported as, and counts its bytes once, on its device, while any
 * live process of the container holds it: the exporter's release no longer gives it back while an
 * importer still holds it, and two holders never count it twice. */
#ifndef VGPU_SHARES_H
#define VGPU_SHARES_H

#include <stdint.h>

#include "region.h"

/* Moves `bytes` of this process's use of device `dev` into a shared entry known by `id` (a new
 * one when `entry` is -1, else `entry`, which learns one more `id`); returns the entry, or -1 when
 * the table is full or the lock cannot be taken (the bytes then stay this process's). */
int vgpu_shares_add(vgpu_region *r, int entry, int dev, uint64_t bytes, const uint64_t id[2]);

/* As vgpu_shares_add, for an allocation exported as a pinned file descriptor (pins.h): the entry
 * also counts while that descriptor is open anywhere. -1 (nothing changed) also when the entry
 * cannot learn one more file: the descriptor would then keep memory nothing counts. */
int vgpu_shares_export(vgpu_region *r, int entry, int dev, uint64_t bytes, const uint64_t id[2]);

/* Makes this process a holder of the live shared entry known by `id`; returns it (with its
 * device and size), or -1 when the container holds none. */
int vgpu_shares_join(vgpu_region *r, const uint64_t id[2], int *dev, uint64_t *bytes);

/* This process no longer holds shared entry `entry`; it is freed when no live process does and,
 * if pinned, no descriptor it was exported as is open (vgpu_shares_check_pins). */
void vgpu_shares_leave(vgpu_region *r, int entry);

#endif
