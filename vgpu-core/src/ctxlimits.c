/* cuCtxSetLimit (what cudaDeviceSetLimit calls): three limits size a buffer the driver keeps in
 * device memory for the context, beyond what the program allocates. From the CUDA Driver API
 * reference: CU_LIMIT_STACK_SIZE "the stack size in bytes of each GPU thread", which "will take
 * effect immediately"; CU_LIMIT_PRINTF_FIFO_SIZE, "the FIFO used by the printf() device system
 * call"; CU_LIMIT_MALLOC_HEAP_SIZE, "the heap used by the malloc() and free() device system
 * calls" (the CUDA Programming Guide: "in addition to memory allocated through host-side CUDA API
 * calls such as cudaMalloc()"). The driver "is free to modify the requested value ... rounding up
 * to nearest element size", so what it set is read back with cuCtxGetLimit.
 *
 * A raise is charged to the grant of the context's GPU before the driver is asked, and refused
 * with CUDA_ERROR_OUT_OF_MEMORY (one of cuCtxSetLimit's documented answers) past it; a driver
 * failure gives the charge back, a lowering gives back the difference, and the context's end
 * (cuCtxDestroy, a primary context's reset or last release: contexts.c) gives back the rest. What
 * is charged is the size beyond the value the limit had when first set in that context (the
 * defaults belong to the context's own memory, which is not counted). The heap is the limit's
 * value; the FIFO too. The stack is reserved for every thread that can be resident at once, for
 * which NVIDIA documents no formula: the charge is the estimate per-thread size x
 * CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR x CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
 * both documented attributes; a driver that rounds the per-thread size up or adds its own frame
 * reserves more, so the estimate is a floor, never a guess above what is held. A device whose
 * attributes cannot be read has its stack raises refused with the query's error. The other limits
 * (device runtime depths, L2 hints) are passed through uncounted. */
#include <pthread.h>
#include <stdint.h>

#include "account.h"
#include "allocs.h"
#include "ctxlimits.h"
#include "hooks.h"
#include "state.h"

typedef CUresult (*set_fn)(int, size_t);
typedef CUresult (*get_fn)(size_t *, int);
typedef CUresult (*attr_fn)(int *, int, CUdevice);
typedef CUresult (*current_fn)(CUcontext *);

enum { STACK = 0, SIZED = 3 }; /* CU_LIMIT_STACK_SIZE, _PRINTF_FIFO_SIZE, _MALLOC_HEAP_SIZE */
enum { ATTR_SMS = 16, ATTR_THREADS_PER_SM = 39 };

typedef struct {
    CUcontext ctx;
    int index;                 /* limits index of its GPU */
    int seen[SIZED];           /* base[i] holds the value limit i had when first set */
    size_t base[SIZED];
    uint64_t charged[SIZED];   /* bytes charged beyond base */
} ctx_limits;

static ctx_limits *table;
static size_t cap, count;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* held over a whole cuCtxSetLimit */

/* Under mu: the context's entry, added when new; NULL out of host memory. */
static ctx_limits *entry_of(CUcontext ctx, int index)
{
    for (size_t i = 0; i < count; i++)
        if (table[i].ctx == ctx)
            return &table[i];
    if (vgpu_grow((void **)&table, &cap, count, sizeof *table) != 0)
        return NULL;
    table[count] = (ctx_limits){.ctx = ctx, .index = index};
    return &table[count++];
}

/* Device memory per unit of the limit's value (resident threads for the stack): 0 and *per, or
 * the attribute query's error. */
static CUresult unit_bytes(int limit, CUdevice dev, uint64_t *per)
{
    attr_fn attr = REAL_CU(attr_fn, cuDeviceGetAttribute);
    int sms = 0, threads = 0;
    *per = 1;
    if (limit != STACK)
        return CUDA_SUCCESS;
    if (!attr)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = attr(&sms, ATTR_SMS, dev);
    rc = rc ? rc : attr(&threads, ATTR_THREADS_PER_SM, dev);
    if (rc == CUDA_SUCCESS && (sms <= 0 || threads <= 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    *per = (uint64_t)sms * (uint64_t)threads;
    return rc;
}

/* Bytes `value` takes beyond `base`; UINT64_MAX on overflow (which never fits). */
static uint64_t beyond(size_t base, size_t value, uint64_t per)
{
    uint64_t bytes;
    if (value <= base)
        return 0;
    return __builtin_mul_overflow((uint64_t)(value - base), per, &bytes) ? UINT64_MAX : bytes;
}

/* Under mu, for a sized limit of the current context `ctx` on `dev`. */
static CUresult set_sized(set_fn real, CUcontext ctx, CUdevice dev, int limit, size_t value)
{
    get_fn get = REAL_CU(get_fn, cuCtxGetLimit);
    uint64_t per;
    size_t now = 0;
    int index;
    CUresult rc = vgpu_device_index(dev, &index);
    rc = rc ? rc : unit_bytes(limit, dev, &per);
    if (rc == CUDA_SUCCESS && (!get || get(&now, limit) != CUDA_SUCCESS))
        return real(limit, value); /* a limit the driver does not have: its own answer */
    ctx_limits *e = rc ? NULL : entry_of(ctx, index);
    if (!e)
        return rc ? rc : CUDA_ERROR_OUT_OF_MEMORY;
    if (!e->seen[limit]) {
        e->seen[limit] = 1;
        e->base[limit] = now;
    }
    uint64_t held = e->charged[limit], want = beyond(e->base[limit], value, per);
    if (want > held && (rc = vgpu_reserve(e->index, want - held)) != CUDA_SUCCESS)
        return rc;
    held = want > held ? want : held;
    rc = real(limit, value);
    if (rc == CUDA_SUCCESS && get(&now, limit) == CUDA_SUCCESS)
        want = beyond(e->base[limit], now, per); /* as the driver rounded it */
    else if (rc != CUDA_SUCCESS)
        want = e->charged[limit];
    if (want > held)
        vgpu_force_reserve(e->index, want - held); /* the driver holds it already */
    else if (held > want)
        vgpu_unreserve(e->index, held - want);
    e->charged[limit] = want;
    return rc;
}

VGPU_EXPORT CUresult cuCtxSetLimit(int limit, size_t value)
{
    set_fn real = REAL_CU(set_fn, cuCtxSetLimit);
    current_fn current = REAL_CU(current_fn, cuCtxGetCurrent);
    CUcontext ctx = NULL;
    CUdevice dev;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    if (limit < 0 || limit >= SIZED || !current || current(&ctx) != CUDA_SUCCESS || !ctx ||
        vgpu_current_device(&dev) != CUDA_SUCCESS)
        return real(limit, value); /* sizes nothing we count, or no context: the driver answers */
    pthread_mutex_lock(&mu);
    CUresult rc = set_sized(real, ctx, dev, limit, value);
    pthread_mutex_unlock(&mu);
    return rc;
}

void vgpu_ctxlimits_gone(CUcontext ctx)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; ctx && i < count; i++) {
        if (table[i].ctx != ctx)
            continue;
        for (int l = 0; l < SIZED; l++)
            vgpu_unreserve(table[i].index, table[i].charged[l]);
        table[i] = table[--count];
        break;
    }
    pthread_mutex_unlock(&mu);
}

void vgpu_ctxlimits_forget(void)
{
    pthread_mutex_init(&mu, NULL);
    count = 0; /* the table itself is kept, for the child's own contexts */
}
