/* Memory pools (pools.c): each pool is charged what it reserves on its own device. */
#ifndef VGPU_POOLS_H
#define VGPU_POOLS_H

#include <stddef.h>

#include "driver_api.h"

/* Remembers a pool's device: its ordinal and limits index (-1: a host pool). */
void vgpu_pool_note(CUmemoryPool pool, CUdevice dev, int index);
/* A pool's device (an unknown pool is taken to be on the current context's device and remembered
 * so: the hooks see every pool a process can allocate from, created, default and current ones;
 * imported pools cannot allocate). */
CUresult vgpu_pool_device(CUmemoryPool pool, CUdevice *dev, int *index);
/* The current pool of device `dev` (what cuMemAllocAsync on a stream of `dev` draws from), or
 * NULL. */
CUmemoryPool vgpu_device_pool(CUdevice dev);
/* Before allocating `bytes` from `pool`: reserves them on the pool's device (*index; -1 when
 * nothing is counted). */
CUresult vgpu_pool_begin(CUmemoryPool pool, size_t bytes, int *index);
/* After the real allocation: records it, sets the pool's charge, gives the reservation back. */
CUresult vgpu_pool_end(CUmemoryPool pool, int index, size_t bytes, CUresult rc, CUdeviceptr dptr);
/* Before a free: the pool `dptr` came from (its record taken), or NULL when not from a pool. */
CUmemoryPool vgpu_pool_free_begin(CUdeviceptr dptr);
/* After the real free: sets the pool's charge, or restores the record when the free failed. */
CUresult vgpu_pool_free_end(CUmemoryPool pool, CUdeviceptr dptr, CUresult rc);
/* Sets every pool's charge to what the driver reserves now (before refusing an allocation). */
void vgpu_pools_reconcile(void);
/* Forgets every pool (a forked child). */
void vgpu_pools_forget(void);

#endif
