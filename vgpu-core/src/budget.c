/* Closed-loop cores budget. The container's own measured busy time is charged against a shared
 * budget per GPU that is refilled every period with `allowance` percent of it. Debt carries over,
 * so over any window of a few periods the busy time equals the allowance whatever the kernels'
 * lengths; an idle container saves up at most one period. */
#include "budget.h"

#include <errno.h>
#include <time.h>

/* Each device's `scale` as the refilling process last read it; only refill() uses it, right
 * after reading the file, so it needs no place in the shared region. */
static int scales[VGPU_MAX_DEVICES];

/* The measured busy time one period refills: `allowance` percent of the period, times `scale`
 * (permille), the agent's correction for what the events measure beyond the container's own
 * work while neighbours share the GPU. */
static int64_t period_budget(int allowance, int scale)
{
    return VGPU_PERIOD_NS * allowance / 100 * scale / VGPU_SCALE_NEUTRAL;
}

/* Re-reads `limits`; a file that became unreadable or invalid holds the container to `cores`. */
static void reload_allowances(const vgpu_state *s)
{
    vgpu_limits now;
    char err[200];
    int ok = vgpu_limits_load(VGPU_LIMITS_DIR "/limits", &now, err, sizeof err) == 0;
    for (int i = 0; i < s->limits.count; i++) {
        int found = ok ? vgpu_limits_find(&now, s->limits.dev[i].uuid) : -1;
        int allowance = found >= 0 ? now.dev[found].allowance : s->limits.dev[i].cores;
        scales[i] = found >= 0 ? now.dev[found].scale : VGPU_SCALE_NEUTRAL;
        __atomic_store_n(&s->region->dev[i].allowance, allowance, __ATOMIC_RELAXED);
    }
}

static void refill(const vgpu_state *s, uint64_t now)
{
    vgpu_region *r = s->region;
    uint64_t next = __atomic_load_n(&r->next_refill_ns, __ATOMIC_ACQUIRE);
    if (now < next)
        return; /* another process refilled while we waited for the lock */
    uint64_t periods = next == 0 ? 1 : (now - next) / VGPU_PERIOD_NS + 1;
    reload_allowances(s);
    for (int i = 0; i < s->limits.count; i++) {
        int64_t cap = period_budget(__atomic_load_n(&r->dev[i].allowance, __ATOMIC_RELAXED),
                                    scales[i]);
        int64_t budget = __atomic_load_n(&r->dev[i].budget_ns, __ATOMIC_RELAXED);
        int64_t added = periods > 64 ? 64 * cap : (int64_t)periods * cap;
        budget = budget + added > cap ? cap : budget + added;
        __atomic_store_n(&r->dev[i].budget_ns, budget, __ATOMIC_RELAXED);
    }
    next = next == 0 ? now + VGPU_PERIOD_NS : next + periods * VGPU_PERIOD_NS;
    __atomic_store_n(&r->next_refill_ns, next, __ATOMIC_RELEASE);
}

void vgpu_budget_refill_if_due(const vgpu_state *s, uint64_t now)
{
    if (now < __atomic_load_n(&s->region->next_refill_ns, __ATOMIC_ACQUIRE))
        return;
    vgpu_region_lock(s->region);
    refill(s, now);
    vgpu_region_unlock(s->region);
}

void vgpu_budget_charge(const vgpu_state *s, int index, int64_t ns)
{
    __atomic_fetch_sub(&s->region->dev[index].budget_ns, ns, __ATOMIC_RELAXED);
}

int vgpu_budget_allowance(const vgpu_state *s, int index)
{
    return __atomic_load_n(&s->region->dev[index].allowance, __ATOMIC_RELAXED);
}

int vgpu_budget_left(const vgpu_state *s, int index)
{
    return __atomic_load_n(&s->region->dev[index].budget_ns, __ATOMIC_RELAXED) > 0;
}

void vgpu_budget_sleep(const vgpu_state *s)
{
    uint64_t next = __atomic_load_n(&s->region->next_refill_ns, __ATOMIC_ACQUIRE);
    struct timespec until = {(time_t)(next / 1000000000ULL), (long)(next % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}
