/* Mapping a file of the shared directory: created usable by every user of the container, sized
 * and initialised once, and refused (never re-initialised) when another layout is found there. */
#ifndef VGPU_SHARED_FILE_H
#define VGPU_SHARED_FILE_H

#include <stddef.h>

/* Opens dir/name (creating it), sized `size`, and maps it; `init` fills in a blank file, whose
 * first 8 bytes then become `magic`. On success the descriptor is left in *keep when keep is not
 * NULL (else closed); NULL with a one-line reason in err on failure. */
void *vgpu_map_shared(const char *dir, const char *name, size_t size, const char *magic,
                      int (*init)(void *), int *keep, char *err, size_t errlen);

#endif
