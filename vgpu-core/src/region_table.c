/* The reads of the shared-allocation table that the region's sums and reaps need
 * (region_table.h). What they read is untrusted (any process of the container can write the
 * file): sums saturate and a device index is compared, never used to index. */
#include "region_table.h"

#include <string.h>

#include "pins.h"

#define WORDS (VGPU_MAX_PROCS / 64)

int vgpu_shared_live(const vgpu_region *r, const vgpu_shared *e)
{
    for (int w = 0; w < WORDS; w++)
        for (uint64_t bits = e->holders[w]; bits; bits &= bits - 1)
            if (r->proc[w * 64 + __builtin_ctzll(bits)].claimed)
                return 1;
    return 0;
}

int vgpu_shared_counted(const vgpu_region *r, const vgpu_shared *e)
{
    return e->bytes && (e->pinned || vgpu_shared_live(r, e));
}

uint64_t vgpu_shares_used(const vgpu_region *r, int dev)
{
    uint64_t total = 0;
    for (int i = 0; i < VGPU_MAX_SHARED; i++) {
        const vgpu_shared *e = &r->shared[i];
        uint64_t bytes = e->bytes;
        if (bytes && e->index == (uint32_t)dev && vgpu_shared_counted(r, e))
            total = total + bytes < total ? UINT64_MAX : total + bytes;
    }
    return total;
}

void vgpu_shares_drop_slot(vgpu_region *r, int slot)
{
    for (int i = 0; i < VGPU_MAX_SHARED; i++)
        r->shared[i].holders[slot / 64] &= ~(1ull << (slot % 64));
}

/* Only an entry no live process holds depends on its descriptors; those are asked about
 * together, with one read of the kernel's list of locks. */
void vgpu_shares_check_pins(vgpu_region *r, const uint64_t state[2])
{
    uint64_t ids[VGPU_MAX_SHARED * VGPU_SHARED_IDS][2];
    unsigned char open[VGPU_MAX_SHARED * VGPU_SHARED_IDS];
    int n = 0, orphans = 0;
    for (int i = 0; i < VGPU_MAX_SHARED; i++) {
        vgpu_shared *e = &r->shared[i];
        int orphan = e->bytes && e->pinned && !vgpu_shared_live(r, e);
        for (int k = 0; orphan && k < VGPU_SHARED_IDS; k++, n++)
            memcpy(ids[n], e->id[k], sizeof ids[n]);
        orphans += orphan;
    }
    memset(open, 0, sizeof open);
    if (!orphans || vgpu_pins_open((const uint64_t(*)[2])ids, n, open, state) != 0)
        return; /* nothing to ask, or cannot tell: everything stays counted */
    n = 0;
    for (int i = 0; i < VGPU_MAX_SHARED; i++) {
        vgpu_shared *e = &r->shared[i];
        if (!(e->bytes && e->pinned && !vgpu_shared_live(r, e)))
            continue;
        int still = 0;
        for (int k = 0; k < VGPU_SHARED_IDS; k++, n++)
            still |= open[n] && (e->id[k][0] || e->id[k][1]);
        if (!still)
            memset(e, 0, sizeof *e); /* every descriptor closed: the driver freed it */
    }
}

void vgpu_shares_prune(vgpu_shared *e, const uint64_t state[2])
{
    unsigned char open[VGPU_SHARED_IDS] = {0};
    if (vgpu_pins_open((const uint64_t(*)[2])e->id, VGPU_SHARED_IDS, open, state) != 0)
        return;
    for (int k = 0; k < VGPU_SHARED_IDS; k++)
        if (!open[k])
            memset(e->id[k], 0, sizeof e->id[k]);
}
