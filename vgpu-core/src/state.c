/* Loading the grant once per process, failing closed with one stderr line, and resolving devices
 * to `device` lines by UUID (never by ordinal: CUDA and NVML may number them differently). */
#define _GNU_SOURCE
#include "state.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hooks.h"

#define MAX_ORDINALS 64
#define MAX_CONTEXTS 64

static vgpu_state state;
static const vgpu_state *loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ordinal_index[MAX_ORDINALS]; /* limits index + 2; 0 = not looked up, 1 = unlisted */
static struct {
    CUcontext ctx;
    CUdevice dev;
} contexts[MAX_CONTEXTS];
static pthread_mutex_t contexts_mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t vgpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void load(void)
{
    char err[200];
    const char *path = VGPU_LIMITS_DIR "/limits";
    if (vgpu_limits_load(path, &state.limits, err, sizeof err) != 0) {
        fprintf(stderr, "vgpu-core: %s: %s; every CUDA call is refused until the node agent writes "
                        "a valid limits file\n", path, err);
        return;
    }
    if (vgpu_region_open(VGPU_SHARED_DIR, &state.region, &state.activity, err, sizeof err) != 0) {
        fprintf(stderr, "vgpu-core: %s; every CUDA call is refused (the node agent mounts %s "
                        "read-write)\n", err, VGPU_SHARED_DIR);
        return;
    }
    for (int i = 0; i < state.limits.count; i++) {
        int expected = 0;
        __atomic_compare_exchange_n(&state.region->dev[i].allowance, &expected,
                                    state.limits.dev[i].allowance, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST);
    }
    loaded = &state;
}

const vgpu_state *vgpu_state_get(void)
{
    pthread_once(&once, load);
    return loaded;
}

void vgpu_note_context(CUcontext ctx, CUdevice dev)
{
    pthread_mutex_lock(&contexts_mu);
    int free_slot = -1;
    for (int i = 0; i < MAX_CONTEXTS; i++) {
        if (contexts[i].ctx == ctx) {
            free_slot = i;
            break;
        }
        if (!contexts[i].ctx && free_slot < 0)
            free_slot = i;
    }
    if (free_slot >= 0) {
        contexts[free_slot].ctx = ctx;
        contexts[free_slot].dev = dev;
    }
    pthread_mutex_unlock(&contexts_mu);
}

static void format_uuid(const unsigned char *b, char *hex)
{
    snprintf(hex, VGPU_UUID_HEX_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

CUresult vgpu_device_index(CUdevice dev, int *index)
{
    const vgpu_state *s = vgpu_state_get();
    if (!s)
        return CUDA_ERROR_NOT_PERMITTED;
    if (dev < 0 || dev >= MAX_ORDINALS)
        return CUDA_ERROR_INVALID_DEVICE;
    int cached = __atomic_load_n(&ordinal_index[dev], __ATOMIC_RELAXED);
    if (cached == 0) {
        typedef CUresult (*uuid_fn)(unsigned char *, CUdevice);
        uuid_fn fn = REAL_CU(uuid_fn, cuDeviceGetUuid_v2);
        if (!fn)
            fn = REAL_CU(uuid_fn, cuDeviceGetUuid);
        unsigned char bytes[16];
        char hex[VGPU_UUID_HEX_LEN + 1];
        if (!fn || fn(bytes, dev) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_DEVICE;
        format_uuid(bytes, hex);
        cached = vgpu_limits_find(&s->limits, hex) + 2;
        __atomic_store_n(&ordinal_index[dev], cached, __ATOMIC_RELAXED);
    }
    if (cached == 1)
        return CUDA_ERROR_INVALID_DEVICE;
    *index = cached - 2;
    return CUDA_SUCCESS;
}

CUresult vgpu_current_device(CUdevice *dev)
{
    typedef CUresult (*get_dev_fn)(CUdevice *);
    typedef CUresult (*get_ctx_fn)(CUcontext *);
    get_dev_fn get_dev = REAL_CU(get_dev_fn, cuCtxGetDevice);
    if (get_dev)
        return get_dev(dev);
    get_ctx_fn get_ctx = REAL_CU(get_ctx_fn, cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (!get_ctx || get_ctx(&ctx) != CUDA_SUCCESS || !ctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&contexts_mu);
    for (int i = 0; i < MAX_CONTEXTS; i++)
        if (contexts[i].ctx == ctx) {
            *dev = contexts[i].dev;
            rc = CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&contexts_mu);
    return rc;
}

CUresult vgpu_current_index(int *index)
{
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    CUdevice dev = 0;
    CUresult rc = vgpu_current_device(&dev);
    return rc != CUDA_SUCCESS ? rc : vgpu_device_index(dev, index);
}

/* The device of `ctx`, read with it pushed for the moment (cuCtxPushCurrent/cuCtxPopCurrent
 * leave the thread's stack as it was); without those calls, the current context's. */
CUresult vgpu_context_device(CUcontext ctx, CUdevice *dev)
{
    typedef CUresult (*push_fn)(CUcontext);
    typedef CUresult (*pop_fn)(CUcontext *);
    push_fn push = REAL_CU(push_fn, cuCtxPushCurrent_v2);
    pop_fn pop = REAL_CU(pop_fn, cuCtxPopCurrent_v2);
    if (!push || !pop)
        return vgpu_current_device(dev);
    CUresult rc = push(ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = vgpu_current_device(dev);
    pop(&ctx);
    return rc;
}

/* CUDA Driver API, cuStreamGetCtx: the context a stream belongs to (for the NULL, legacy and
 * per-thread streams, the calling thread's current one). A driver without it (before CUDA 9.2)
 * has no stream-ordered allocation either: there the current context's device is the answer. */
CUresult vgpu_stream_device(CUstream stream, CUdevice *dev)
{
    typedef CUresult (*stream_ctx_fn)(CUstream, CUcontext *);
    stream_ctx_fn stream_ctx = REAL_CU(stream_ctx_fn, cuStreamGetCtx);
    CUcontext ctx = NULL;
    if (!stream_ctx)
        return vgpu_current_device(dev);
    CUresult rc = stream_ctx(stream, &ctx);
    return rc != CUDA_SUCCESS ? rc : vgpu_context_device(ctx, dev);
}
