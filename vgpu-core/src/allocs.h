/* What this process allocated, so a free gives back exactly what the allocation counted. */
#ifndef VGPU_ALLOCS_H
#define VGPU_ALLOCS_H

#include <stddef.h>
#include <stdint.h>

enum { VGPU_KIND_POINTER = 1, VGPU_KIND_VMM = 2, VGPU_KIND_ARRAY = 3, VGPU_KIND_MIPMAP = 4 };
/* A pointer allocated from a pool: its `bytes` hold the pool handle (the pool is charged). */
enum { VGPU_KIND_POOLED = 5 };
/* A pointer exported by cuIpcGetMemHandle: its `bytes` hold the shared entry counting it. */
enum { VGPU_KIND_EXPORTED = 6 };

/* Records an allocation; -1 if it cannot be recorded (out of host memory). */
int vgpu_allocs_put(int kind, uint64_t key, int dev, uint64_t bytes);
/* The same, for an allocation that `owner` (a context) frees when it ends. */
int vgpu_allocs_put_owned(int kind, uint64_t key, int dev, uint64_t bytes, const void *owner);
/* Removes every allocation of `owner` (not NULL), calling `gone` with each one's device and
 * size outside the table's lock. */
void vgpu_allocs_drop_owner(const void *owner, void (*gone)(int dev, uint64_t bytes));
/* Removes the allocation and returns 0 with its device and size, or -1 when unknown. */
int vgpu_allocs_take(int kind, uint64_t key, int *dev, uint64_t *bytes);
/* Forgets every record (a forked child holds none of its parent's allocations). */
void vgpu_allocs_forget(void);
/* Forgets the VMM handles and mappings (vmm.c; a forked child, fork.c). */
void vgpu_vmm_forget(void);
/* Forgets the legacy IPC memory this process opened (ipc.c; a forked child, fork.c). */
void vgpu_ipc_forget(void);
/* Room for element n of a growable array of *cap elements: 0, or -1 out of host memory. */
int vgpu_grow(void **array, size_t *cap, size_t n, size_t elem);

#endif
