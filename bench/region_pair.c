/* The cost of vgpu-core's shared region alone: one reservation and its release (the region's
 * file lock, the sum of the container's use, the slot's counter), with no driver involved, so a
 * change to region.c can be timed apart from the stand-in's noise. Prints the least of 30
 * batches of 20,000 pairs, in ns per pair:
 *
 *   cc -O2 -std=gnu11 -Ivgpu-core/src -o /tmp/region_pair bench/region_pair.c \
 *      vgpu-core/src/region.c vgpu-core/src/shared_file.c vgpu-core/src/region_table.c -pthread
 *   mkdir -p /tmp/region && /tmp/region_pair /tmp/region
 *
 * (DIR: an empty directory, where the region's files are created.) */
#include <stdio.h>
#include <time.h>

#include "region.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    vgpu_region *r;
    uint64_t *activity;
    char err[256];
    double best = 1e18;
    if (argc != 2 || vgpu_region_open(argv[1], &r, &activity, err, sizeof err) != 0) {
        fprintf(stderr, "usage: region_pair DIR (%s)\n", argc == 2 ? err : "no DIR");
        return 2;
    }
    for (int batch = 0; batch < 30; batch++) {
        double start = now_ns();
        for (int i = 0; i < 20000; i++) {
            if (vgpu_region_reserve(r, 0, 4096, 1ull << 40) != 0)
                return 1;
            vgpu_region_release(r, 0, 4096);
        }
        double ns = (now_ns() - start) / 20000;
        best = ns < best ? ns : best;
    }
    printf("reserve+release %.0f ns\n", best);
    return 0;
}
