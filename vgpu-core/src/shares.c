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

/* Learns `id` after forgetting the files `e` was exported as whose descriptors are all closed:
 * an allocation exported to one peer after another keeps room for the next. */
static int relearn(vgpu_shared *e, const uint64_t id[2])
{
    uint64_t state[2];
    if (vgpu_region_identity(state) != 0)
        return -1;
    vgpu_shares_prune(e, state);
    return learn(e, id);
}

/* A file identity newly exported names a new file: an older entry that learnt the same one knew
 * a file since closed and gone (its inode reused), which no longer pins it. */
static void forget_identity(vgpu_region *r, int keep, const uint64_t id[2])
{
    for (int i = 0; i < VGPU_MAX_SHARED; i++) {
        vgpu_shared *e = &r->shared[i];
        int left = 0;
        for (int k = 0; i != keep && e->bytes && k < VGPU_SHARED_IDS; k++) {
            if (same(e->id[k], id))
                memset(e->id[k], 0, sizeof e->id[k]);
            left |= e->id[k][0] || e->id[k][1];
        }
        if (i != keep && e->bytes && e->pinned && !left && !vgpu_shared_live(r, e))
            memset(e, 0, sizeof *e);
    }
}

static int free_entry(const vgpu_region *r)
{
    for (int i = 0; i < VGPU_MAX_SHARED; i++)
        if (!vgpu_shared_counted(r, &r->shared[i]))
            return i;
    return -1;
}

/* vgpu_shares_add and vgpu_shares_export: `pin` marks the entry pinned, and then an identity the
 * entry cannot learn is a failure (its descriptor would keep memory nothing counts). */
static int add(vgpu_region *r, int entry, int dev, uint64_t bytes, const uint64_t id[2], int pin)
{
    if (vgpu_region_lock() != 0)
        return -1;
    int slot = vgpu_region_slot(r);
    if (slot >= 0 && pin)
        forget_identity(r, entry, id);
    if (slot >= 0 && entry >= 0 && entry < VGPU_MAX_SHARED) {
        if (learn(&r->shared[entry], id) == 0 || (pin && relearn(&r->shared[entry], id) == 0))
            r->shared[entry].pinned |= (uint32_t)pin;
        else if (pin)
            entry = -1;
    } else if (slot >= 0) {
        entry = free_entry(r);
        uint64_t state[2];
        if (entry < 0 && pin && vgpu_region_identity(state) == 0) {
            vgpu_shares_check_pins(r, state); /* entries only closed descriptors pinned */
            entry = free_entry(r);
        }
        if (entry >= 0) {
            vgpu_shared *e = &r->shared[entry];
            memset(e, 0, sizeof *e);
            memcpy(e->id[0], id, sizeof e->id[0]);
            e->index = (uint32_t)dev;
            e->holders[slot / 64] = 1ull << (slot % 64);
            e->bytes = bytes; /* counted here from now on, and no longer in the slot */
            e->pinned = (uint32_t)pin;
            uncount(r, slot, dev, bytes);
        }
    }
    vgpu_region_unlock();
    return slot >= 0 ? entry : -1;
}

int vgpu_shares_add(vgpu_region *r, int entry, int dev, uint64_t bytes, const uint64_t id[2])
{
    return add(r, entry, dev, bytes, id, 0);
}

int vgpu_shares_export(vgpu_region *r, int entry, int dev, uint64_t bytes, const uint64_t id[2])
{
    return add(r, entry, dev, bytes, id, 1);
}

int vgpu_shares_join(vgpu_region *r, const uint64_t id[2], int *dev, uint64_t *bytes)
{
    int found = -1;
    if (vgpu_region_lock() != 0)
        return -1;
    int slot = vgpu_region_slot(r);
    for (int i = 0; slot >= 0 && found < 0 && i < VGPU_MAX_SHARED; i++) {
        vgpu_shared *e = &r->shared[i];
        if (e->index >= VGPU_MAX_DEVICES || !vgpu_shared_counted(r, e))
            continue; /* a pinned entry no process holds is joined through its descriptor */
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
    if (!vgpu_shared_counted(r, e))
        memset(e, 0, sizeof *e); /* a pinned one waits for its descriptors' last close */
    vgpu_region_unlock();
}
