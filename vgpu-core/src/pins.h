/* Exported VMM descriptors as references to their memory (pins.c). CUDA Driver API reference,
 * cuMemRelease: an allocation "will be freed when all outstanding mappings to the memory are
 * unmapped and when all outstanding references to the handle (including its shareable
 * counterparts) are also released": an exported POSIX file descriptor keeps the memory alive
 * while any copy of it is open, in any process, after every handle was released. */
#ifndef VGPU_PINS_H
#define VGPU_PINS_H

#include <stdint.h>

/* Marks the open file behind exported descriptor `fd` so that whether any copy of it is still
 * open can be asked later from any process: 0, or -1 when it cannot be. */
int vgpu_pin(int fd);

/* For each of the `n` file identities `ids` (fstat's device and inode), whether a pinned
 * descriptor of it is still open anywhere: sets found[i] to 1 for those. 0, or -1 when it cannot
 * be told (then nothing may be taken as closed), which includes a list of locks that does not
 * show an open file description lock the caller holds on the file `canary`. */
int vgpu_pins_open(const uint64_t (*ids)[2], int n, unsigned char *found,
                   const uint64_t canary[2]);

#endif
