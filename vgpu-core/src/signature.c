/* Events bracket a launch, but the elapsed time between them also holds whatever else the GPU ran
 * meanwhile (NVIDIA documents this for cuEventElapsedTime; time-slicing with a neighbour's context
 * does it too). The same kernel with the same shape takes about the same time, so the smallest of
 * its last few measurements is its own busy time; a lasting change of duration shows within
 * WINDOW launches. An executable graph is one signature whose work can change under the same
 * handle (cuGraphExecUpdate and the cuGraphExec*SetParams family, graphexec.c) or whose handle a
 * new graph can reuse (cuGraphExecDestroy): its history then restarts, or the new work would be
 * charged the old work's least time for WINDOW launches, every time (XLA updates one graph each
 * step). Launches in flight when it restarts ran the old work ("The modifications only affect
 * future launches of hGraphExec", CUDA Driver API reference): they carry the epoch they began in,
 * and one begun before the restart is charged its own measurement without joining the history. */
#include "signature.h"

#include <string.h>

#define SLOTS 256
#define WINDOW 8

typedef struct {
    uint64_t signature;
    uint64_t fresh_at; /* launches begun in an earlier epoch are not recorded here */
    int64_t recent[WINDOW];
    unsigned next;
    unsigned filled;
} entry;

static entry table[SLOTS];
static uint64_t epoch_now; /* how many restarts so far */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

uint64_t vgpu_signature(const void *what, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared)
{
    uint64_t h = mix(0, (uint64_t)(uintptr_t)what);
    h = mix(h, ((uint64_t)gx << 32) | gy);
    h = mix(h, ((uint64_t)gz << 32) | bx);
    h = mix(h, ((uint64_t)by << 32) | bz);
    return mix(h, shared) | 1; /* never 0: 0 marks an empty slot */
}

uint64_t vgpu_signature_epoch(void)
{
    return epoch_now;
}

void vgpu_signature_restart(uint64_t signature)
{
    entry *e = &table[signature % SLOTS];
    memset(e, 0, sizeof *e);
    e->signature = signature;
    e->fresh_at = ++epoch_now;
}

/* A signature's entry (re)made after its slot was taken by another may have restarted meanwhile:
 * only launches begun in the current epoch are surely of its current work. */
uint64_t vgpu_graph_signature(const void *exec)
{
    return vgpu_signature(exec, 0, 0, 0, 0, 0, 0, 0);
}

int64_t vgpu_signature_charge(uint64_t signature, uint64_t epoch, int64_t measured_ns)
{
    entry *e = &table[signature % SLOTS];
    if (e->signature != signature) {
        memset(e, 0, sizeof *e);
        e->signature = signature;
        e->fresh_at = epoch_now;
    }
    if (epoch < e->fresh_at)
        return measured_ns;
    e->recent[e->next] = measured_ns;
    e->next = (e->next + 1) % WINDOW;
    if (e->filled < WINDOW)
        e->filled++;
    int64_t least = measured_ns;
    for (unsigned i = 0; i < e->filled; i++)
        least = e->recent[i] < least ? e->recent[i] : least;
    return least;
}

int64_t vgpu_signature_known(uint64_t signature)
{
    const entry *e = &table[signature % SLOTS];
    if (e->signature != signature || e->filled == 0)
        return 0;
    int64_t least = e->recent[0];
    for (unsigned i = 1; i < e->filled; i++)
        least = e->recent[i] < least ? e->recent[i] : least;
    return least;
}

int vgpu_signature_settled(uint64_t signature)
{
    const entry *e = &table[signature % SLOTS];
    return e->signature == signature && e->filled == WINDOW;
}

void vgpu_signature_forget(void)
{
    memset(table, 0, sizeof table);
    epoch_now = 0;
}
