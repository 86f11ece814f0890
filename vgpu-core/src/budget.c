/* Closed-loop cores budget. The container's own measured busy time is charged against a shared
 * budget per GPU that is refilled every period with `allowance` percent of it. Debt carries over,
 * so over any window of a few periods the busy time equals the allowance whatever the kernels'
 * lengths; an idle container saves up at most one period. Every process of the container can
 * write the shared state, so what is read from it is bounded before any arithmetic: no value
 * found there can overflow, trap a sanitized build, or stall a launch for more than a minute. */
#include "budget.h"

#include <errno.h>
#include <time.h>

#define DEBT_PERIODS 600 /* debt is bounded to what 600 refills (one minute) repay */

/* Each device's `scale` as the refilling process last read it; only refill() uses it, right
 * after reading the file, so it needs no place in the shared region. */
static int scales[VGPU_MAX_DEVICES];

/* The measured busy time one period refills: `allowance` percent of the period, times `scale`
 * (permille), the agent's correction for what the events measure beyond the container's own
 * work while neighbours share the GPU. Both are bounded here whatever the region held. */
static int64_t period_budget(int allowance, int scale)
{
    int64_t percent = allowance < 1 ? 1 : allowance > 100 ? 100 : allowance;
    int64_t permille = scale < VGPU_SCALE_NEUTRAL ? VGPU_SCALE_NEUTRAL
                       : scale > VGPU_SCALE_MAX   ? VGPU_SCALE_MAX
                                                  : scale;
    return VGPU_PERIOD_NS * percent / 100 * permille / VGPU_SCALE_NEUTRAL;
}

/* A refill time more than one period ahead was not written by a refill: treat it as due. */
static int refill_due(uint64_t next, uint64_t now)
{
    return now >= next || next - now > (uint64_t)VGPU_PERIOD_NS;
}

/* `budget` after `periods` refills of `cap`: within [-DEBT_PERIODS * cap, cap] whatever it was. */
static int64_t refilled(int64_t budget, int64_t cap, uint64_t periods)
{
    int64_t added = (int64_t)(periods > 64 ? 64 : periods) * cap;
    int64_t floor = -DEBT_PERIODS * cap;
    if (budget < floor)
        budget = floor;
    return budget > cap - added ? cap : budget + added;
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

/* Under the lock. The clock is read here, not before the lock was taken: every refill time written
 * before is then at most one period ahead of it, so one further ahead was forged. */
static void refill(const vgpu_state *s)
{
    vgpu_region *r = s->region;
    uint64_t now = vgpu_now_ns();
    uint64_t next = __atomic_load_n(&r->next_refill_ns, __ATOMIC_ACQUIRE);
    if (!refill_due(next, now))
        return; /* another process refilled while we waited for the lock */
    int fresh = next == 0 || next > now;
    uint64_t periods = fresh ? 1 : (now - next) / VGPU_PERIOD_NS + 1;
    reload_allowances(s);
    for (int i = 0; i < s->limits.count; i++) {
        int64_t cap = period_budget(__atomic_load_n(&r->dev[i].allowance, __ATOMIC_RELAXED),
                                    scales[i]);
        int64_t budget = __atomic_load_n(&r->dev[i].budget_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&r->dev[i].budget_ns, refilled(budget, cap, periods), __ATOMIC_RELAXED);
    }
    next = fresh ? now + VGPU_PERIOD_NS : next + periods * VGPU_PERIOD_NS;
    __atomic_store_n(&r->next_refill_ns, next, __ATOMIC_RELEASE);
}

void vgpu_budget_refill_if_due(const vgpu_state *s, uint64_t now)
{
    if (!refill_due(__atomic_load_n(&s->region->next_refill_ns, __ATOMIC_ACQUIRE), now))
        return;
    if (vgpu_region_lock() != 0)
        return; /* no refill: launches wait, as without budget */
    refill(s);
    vgpu_region_unlock();
}

/* Saturates rather than wrapping: a debt at the bottom of the range must not turn into budget. */
void vgpu_budget_charge(const vgpu_state *s, int index, int64_t ns)
{
    int64_t *budget = &s->region->dev[index].budget_ns;
    int64_t old = __atomic_load_n(budget, __ATOMIC_RELAXED), charged;
    if (ns <= 0)
        return;
    do {
        charged = old < INT64_MIN + ns ? INT64_MIN : old - ns;
    } while (!__atomic_compare_exchange_n(budget, &old, charged, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
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
    uint64_t latest = vgpu_now_ns() + VGPU_PERIOD_NS; /* a refill is never further ahead */
    next = next < latest ? next : latest;
    struct timespec until = {(time_t)(next / 1000000000ULL), (long)(next % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}
