/* Stand-in libcuda.so.1: a context's resource limits (cuCtxSetLimit, cuCtxGetLimit), and the
 * device memory the three that size a buffer take.
 *
 * CUDA Driver API reference, Context Management, cuCtxSetLimit: "Setting limit to value is a
 * request by the application to update the current limit maintained by the context. The driver is
 * free to modify the requested value to meet h/w requirements (this could be clamping to minimum
 * or maximum values, rounding up to nearest element size, etc)"; it returns CUDA_SUCCESS,
 * CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_UNSUPPORTED_LIMIT, CUDA_ERROR_OUT_OF_MEMORY or
 * CUDA_ERROR_INVALID_CONTEXT. Per limit:
 *  - CU_LIMIT_STACK_SIZE (0), "the stack size in bytes of each GPU thread ... Setting this value
 *    will take effect immediately". The stack lives in local memory, which the driver reserves
 *    for every thread that can be resident at once; NVIDIA documents no exact formula, so the
 *    stand-in takes value x CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR x
 *    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, and rounds the value up to 16 bytes (a rounding
 *    the reference allows, so a caller must read the value back with cuCtxGetLimit);
 *  - CU_LIMIT_PRINTF_FIFO_SIZE (1), "the size in bytes of the FIFO used by the printf() device
 *    system call", and CU_LIMIT_MALLOC_HEAP_SIZE (2), "the size in bytes of the heap used by the
 *    malloc() and free() device system calls": each "must be performed before launching any kernel
 *    that uses" printf (malloc), "otherwise CUDA_ERROR_INVALID_VALUE will be returned". The CUDA
 *    Programming Guide (Dynamic Global Memory Allocation) adds "Heap size cannot be changed once a
 *    module load has occurred" and that the heap's memory "is in addition to memory allocated
 *    through host-side CUDA API calls such as cudaMalloc()". The stand-in cannot tell which kernels
 *    use printf or malloc, so after any module load into the context both answer
 *    CUDA_ERROR_INVALID_VALUE.
 * Other limits exist (device runtime depths, L2 hints) but are not simulated: they answer
 * CUDA_ERROR_UNSUPPORTED_LIMIT, as the reference has a device answer for a limit it lacks.
 *
 * The defaults (1 KiB of stack per thread, a 1 MiB printf FIFO, the Programming Guide's "default
 * heap of eight megabytes") belong to the context's own memory (its `context` bytes); a larger
 * value takes the difference from the GPU's memory when it is set, as an SI_CONTEXT allocation of
 * the context, and gives it back when the limit is lowered or the context ends (destroyed, its
 * primary context's last retain released or reset: "Destroy all allocations and reset all state").
 * The new reservation is taken before the old is given back, so a failed change leaves the old. */
#include "cuda_local.h"

SI_EXPORT CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice d); /* cuda_core.c */

static const size_t defaults[SI_LIMITS] = {1024, 1 << 20, 8 << 20};

enum { STACK = 0, ATTR_SMS = 16, ATTR_THREADS_PER_SM = 39 };

void si_cu_limits_open(struct si_ctx *c) {
    for (int i = 0; i < SI_LIMITS; i++) {
        c->limit[i] = defaults[i];
        c->limit_mem[i] = 0;
    }
    c->loaded = 0;
}

void si_cu_limits_close(struct si_ctx *c) {
    for (int i = 0; i < SI_LIMITS; i++)
        if (c->limit_mem[i])
            si_cu_give(c->limit_mem[i], SI_CONTEXT);
}

/* The device memory a limit of `value` reserves beyond its default (0 when it does not). */
static uint64_t beyond_default(const struct si_ctx *c, int limit, size_t value) {
    uint64_t per = 1;
    if (limit == STACK) {
        int sms = 0, threads = 0;
        cuDeviceGetAttribute(&sms, ATTR_SMS, c->dev);
        cuDeviceGetAttribute(&threads, ATTR_THREADS_PER_SM, c->dev);
        per = (uint64_t)sms * (uint64_t)threads;
    }
    uint64_t want, base = (uint64_t)defaults[limit] * per;
    if (__builtin_mul_overflow((uint64_t)value, per, &want))
        return UINT64_MAX;
    return want > base ? want - base : 0;
}

SI_EXPORT CUresult cuCtxSetLimit(int limit, size_t value) {
    struct si_ctx *c = si_cu_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (limit < 0 || limit >= SI_LIMITS)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (limit == STACK)
        value = value > SIZE_MAX - 15 ? SIZE_MAX - 15 : (value + 15) & ~(size_t)15;
    pthread_mutex_lock(&si_cu_mu);
    CUresult rc = limit != STACK && c->loaded ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    uint64_t bytes = beyond_default(c, limit, value);
    unsigned long long mem = 0;
    if (rc == CUDA_SUCCESS && bytes)
        rc = bytes == UINT64_MAX ? CUDA_ERROR_OUT_OF_MEMORY
                                 : si_cu_take(c, -1, bytes, SI_CONTEXT, &mem);
    if (rc == CUDA_SUCCESS) {
        if (c->limit_mem[limit])
            si_cu_give(c->limit_mem[limit], SI_CONTEXT);
        c->limit_mem[limit] = mem;
        c->limit[limit] = value;
    }
    pthread_mutex_unlock(&si_cu_mu);
    return rc;
}

SI_EXPORT CUresult cuCtxGetLimit(size_t *value, int limit) {
    struct si_ctx *c = si_cu_current();
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (limit < 0 || limit >= SI_LIMITS)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    pthread_mutex_lock(&si_cu_mu);
    *value = c->limit[limit];
    pthread_mutex_unlock(&si_cu_mu);
    return CUDA_SUCCESS;
}
