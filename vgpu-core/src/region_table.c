/* The reads of the shared-allocation table that the region's sums and reaps need
 * (region_table.h). What they read is untrusted (any process of the container can write the
 * file): sums saturate and a device index is compared, never used to index. */
#include "region_table.h"

#define WORDS (VGPU_MAX_PROCS / 64)

int vgpu_shared_live(const vgpu_region *r, const vgpu_shared *e)
{
    for (int w = 0; w < WORDS; w++)
        for (uint64_t bits = e->holders[w]; bits; bits &= bits - 1)
            if (r->proc[w * 64 + __builtin_ctzll(bits)].claimed)
                return 1;
    return 0;
}

uint64_t vgpu_shares_used(const vgpu_region *r, int dev)
{
    uint64_t total = 0;
    for (int i = 0; i < VGPU_MAX_SHARED; i++) {
        const vgpu_shared *e = &r->shared[i];
        uint64_t bytes = e->bytes;
        if (bytes && e->index == (uint32_t)dev && vgpu_shared_live(r, e))
            total = total + bytes < total ? UINT64_MAX : total + bytes;
    }
    return total;
}

void vgpu_shares_drop_slot(vgpu_region *r, int slot)
{
    for (int i = 0; i < VGPU_MAX_SHARED; i++)
        r->shared[i].holders[slot / 64] &= ~(1ull << (slot % 64));
}
