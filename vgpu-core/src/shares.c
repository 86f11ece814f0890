/* The region's table of shared VMM allocations (shares.h). Every function runs under the region's
 * lock; what it reads there is untrusted (any process of the container can write it), so a
 * device index is bounded before use and sums saturate. */
#include "shares.h"

#include <string.h>


static int holds(const vgpu_shared *e, int slot)
{
    return (e->holders[slot / 64] >> (slot % 64)) & 1;
}

static int same(const uint64_t a[2], const uint64_t b[2])
{
    return a[0] == b[0] && a[1] == b[1];
}

/* Takes `bytes` off this process's counter of `dev` (saturating at 0). */
static void uncount(vgpu_region *r, int slot, int dev, uint64_t bytes)
{
    uint64_t *used = &r->proc[slot].used[dev];
    uint64_t old = __atomic_load_n(used, __ATOMIC_RELAXED), left;
    do {
        left = old > bytes ? old - bytes : 0;
    } while (!__atomic_compare_exchange_n(used, &old, left, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static int learn(vgpu_shared *e, const uint64_t id[2])
{
    for (int i = 0; i < VGPU_SHARED_IDS; i++) {
        if (same(e->id[i], id))
            return 0;
        if (!e->id[i][0] && !e->id[i][1]) {
            memcpy(e->id[i], id, sizeof e->id[i]);
            return 0;
        }
    }
    return -1; /* exported as more files than an entry knows: importers of this one pay again */
}

int vgpu_shares_add(vgpu_region *r, int entry, int dev, uint64_t bytes, const uint64_t id[2])
{
    if (vgpu_region_lock() != 0)
        return -1;
    int slot = vgpu_region_slot(r);
    if (slot >= 0 && entry >= 0 && entry < VGPU_MAX_SHARED) {
        learn(&r->shared[entry], id);
    } else if (slot >= 0) {
        entry = -1;
        for (int i = 0; entry < 0 && i < VGPU_MAX_SHARED; i++)
            entry = r->shared[i].bytes && vgpu_shared_live(r, &r->shared[i]) ? -1 : i;
        if (entry >= 0) {
            vgpu_shared *e = &r->shared[entry];
            memset(e, 0, sizeof *e);
            memcpy(e->id[0], id, sizeof e->id[0]);
            e->index = (uint32_t)dev;
            e->holders[slot / 64] = 1ull << (slot % 64);
            e->bytes = bytes; /* counted here from now on, and no longer in the slot */
            uncount(r, slot, dev, bytes);
        }
    }
    vgpu_region_unlock();
    return slot >= 0 ? entry : -1;
}

int vgpu_shares_join(vgpu_region *r, const uint64_t id[2], int *dev, uint64_t *bytes)
{
    int found = -1;
    if (vgpu_region_lock() != 0)
        return -1;
    int slot = vgpu_region_slot(r);
    for (int i = 0; slot >= 0 && found < 0 && i < VGPU_MAX_SHARED; i++) {
        vgpu_shared *e = &r->shared[i];
        if (!e->bytes || e->index >= VGPU_MAX_DEVICES || !vgpu_shared_live(r, e))
            continue;
        for (int k = 0; found < 0 && k < VGPU_SHARED_IDS; k++)
            found = same(e->id[k], id) ? i : -1;
        if (found >= 0) {
            e->holders[slot / 64] |= 1ull << (slot % 64);
            *dev = (int)e->index;
            *bytes = e->bytes;
        }
    }
    vgpu_region_unlock();
    return found;
}

void vgpu_shares_leave(vgpu_region *r, int entry)
{
    if (entry < 0 || entry >= VGPU_MAX_SHARED || vgpu_region_lock() != 0)
        return;
    int slot = vgpu_region_slot(r);
    vgpu_shared *e = &r->shared[entry];
    if (slot >= 0 && holds(e, slot))
        e->holders[slot / 64] &= ~(1ull << (slot % 64));
    if (!vgpu_shared_live(r, e))
        memset(e, 0, sizeof *e);
    vgpu_region_unlock();
}
