/* The per-container `limits` file (format in vgpu-core/README.md, "The contract"): parsed strictly,
 * because anything the library does not understand must fail closed rather than enforce less. */
#ifndef VGPU_LIMITS_H
#define VGPU_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#define VGPU_MAX_DEVICES 16
#define VGPU_LIMITS_MAX_BYTES 4096
#define VGPU_UUID_HEX_LEN 36

typedef struct {
    char uuid[VGPU_UUID_HEX_LEN + 1]; /* the 36 characters after `GPU-`/`MIG-`, lower case */
    uint64_t memory;                  /* bytes */
    int cores;                        /* guaranteed percent of busy time */
    int limit;                        /* elastic upper bound */
    int allowance;                    /* what the container may use now */
    int scale;                        /* permille: measured busy time per percent of allowance */
} vgpu_limit;

#define VGPU_SCALE_NEUTRAL 1000
#define VGPU_SCALE_MAX 8000

typedef struct {
    int count;
    vgpu_limit dev[VGPU_MAX_DEVICES];
} vgpu_limits;

/* Parses `len` bytes; on error returns -1 and writes a one-line reason into err. */
int vgpu_limits_parse(const char *text, size_t len, vgpu_limits *out, char *err, size_t errlen);

/* Reads and parses the file at path; errors name the problem (missing, unreadable, too large). */
int vgpu_limits_load(const char *path, vgpu_limits *out, char *err, size_t errlen);

/* Index of the device whose UUID hex part equals `hex` (36 chars, any case), or -1. */
int vgpu_limits_find(const vgpu_limits *limits, const char *hex);

#endif
