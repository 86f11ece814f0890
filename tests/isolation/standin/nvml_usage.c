/* Stand-in libnvidia-ml.so.1: what the simulated GPUs are doing right now, read from the state
 * file that the stand-in libcuda.so.1 writes: memory, utilisation (busy time over the last
 * second of each GPU's timeline), processes (the compute, graphics and MPS lists), and XID
 * events (injected by tests with `vgpu-standin-ctl xid`). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml_local.h"

#define SI_WINDOW_NS 1000000000ull

#define SI_GPU_OR_RETURN(d)                                                                      \
    struct si_node *n;                                                                           \
    int idx;                                                                                     \
    nvmlReturn_t rc = si_nv_dev(d, &n, &idx);                                                    \
    if (rc != NVML_SUCCESS)                                                                      \
        return rc;

SI_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    SI_GPU_OR_RETURN(d)
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct si_shared *sh = si_lock(n);
    m->total = n->cfg.gpu[idx].memory;
    m->used = sh->gpu[idx].used;
    m->free = m->total - m->used;
    si_unlock(n);
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    nvmlMemory_t v1;
    if (m && m->version != NVML_MEMORY_V2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t rc = nvmlDeviceGetMemoryInfo(d, m ? &v1 : NULL);
    if (rc == NVML_SUCCESS) {
        m->total = v1.total;
        m->reserved = 0;
        m->free = v1.free;
        m->used = v1.used;
    }
    return rc;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    SI_GPU_OR_RETURN(d)
    if (!u)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t now = si_now_ns();
    struct si_shared *sh = si_lock(n);
    uint64_t busy = si_busy_window(sh, idx, 0, now - SI_WINDOW_NS, now);
    si_unlock(n);
    u->gpu = (unsigned)(busy * 100 / SI_WINDOW_NS);
    u->memory = 0;
    return NVML_SUCCESS;
}

static uint64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

/* NVML API Reference, nvmlDeviceGetProcessUtilization: one sample per process that had non-zero
 * utilisation in the sample period, with the CPU timestamp (microseconds) it was taken at; only
 * samples newer than lastSeenTimeStamp are returned, NVML_ERROR_NOT_FOUND when there is none, and
 * NVML_ERROR_INSUFFICIENT_SIZE (with the count needed) when the buffer is NULL or too small.
 * smUtil is the percent of the period the process's kernels kept the GPU busy: here the work
 * each ran on the time-sliced timeline (timeline.c) since lastSeenTimeStamp, at most the last
 * second (the stand-in's sample period), so a neighbour's turns are not counted as its own. */
SI_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
                                                      nvmlProcessUtilizationSample_t *samples,
                                                      unsigned *count, unsigned long long since) {
    SI_GPU_OR_RETURN(d)
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t now = si_now_ns(), now_us = wall_us();
    uint64_t from = now - SI_WINDOW_NS;
    if (since && since < now_us && (now_us - since) * 1000 < SI_WINDOW_NS)
        from = now - (now_us - since) * 1000; /* NVML: samples newer than `since` (wall µs) */
    int pids[SI_MAX_PROCS], np = 0;
    struct si_shared *sh = si_lock(n);
    for (uint64_t i = 0; i < SI_KRING && np < SI_MAX_PROCS; i++) {
        const struct si_kernel *k = &sh->gpu[idx].kring[i];
        int seen = 0;
        for (int j = 0; j < np; j++)
            seen |= pids[j] == k->pid;
        if (k->pid && !seen && si_kernel_last(sh, idx, k) > from)
            pids[np++] = k->pid;
    }
    uint64_t busy[SI_MAX_PROCS];
    int kept = 0;
    for (int j = 0; j < np; j++) { /* only processes that used the GPU in the period */
        uint64_t b = si_busy_window(sh, idx, pids[j], from, now);
        if (b > 0) {
            pids[kept] = pids[j];
            busy[kept++] = b;
        }
    }
    np = kept;
    rc = NVML_SUCCESS;
    if (np == 0)
        rc = NVML_ERROR_NOT_FOUND;
    else if (!samples || *count < (unsigned)np)
        rc = NVML_ERROR_INSUFFICIENT_SIZE;
    for (int j = 0; rc == NVML_SUCCESS && j < np; j++) {
        memset(&samples[j], 0, sizeof(samples[j]));
        samples[j].pid = (unsigned)pids[j];
        samples[j].timeStamp = now_us;
        samples[j].smUtil = (unsigned)(busy[j] * 100 / (now - from));
    }
    si_unlock(n);
    *count = (unsigned)np;
    return rc;
}

/* The running-process lists (NVML API reference, "Device Queries"). Each lists the processes
 * with a context of its kind on the device: nvmlDeviceGetComputeRunningProcesses "returns
 * information only about compute running processes (e.g. CUDA application which have active
 * context). Any graphics applications (e.g. using OpenGL, DirectX) won't be listed by this
 * function"; nvmlDeviceGetGraphicsRunningProcesses gets "information about processes with a
 * graphics context on a device" and "returns information only about graphics based processes";
 * nvmlDeviceGetMPSComputeRunningProcesses, about "processes with a Multi-Process Service (MPS)
 * compute context". So a process with both a compute and a graphics context is in both lists,
 * and for each list "The usedGpuMemory field returned is all of the memory used by the
 * application": the same bytes twice, not two shares. With *infoCount = 0 (infos may then be
 * NULL) the answer is NVML_ERROR_INSUFFICIENT_SIZE, or NVML_SUCCESS if none are running; the
 * count needed comes back either way. A process's context kinds: si_proc.contexts, set by the
 * knob VGPU_STANDIN_CONTEXT (node.c). */
static nvmlReturn_t processes(nvmlDevice_t d, unsigned *count, nvmlProcessInfo_t *infos,
                              int32_t kind) {
    SI_GPU_OR_RETURN(d)
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned found = 0, room = infos ? *count : 0;
    struct si_shared *sh = si_lock(n);
    for (int s = 0; s < SI_MAX_PROCS; s++) {
        const struct si_proc *p = &sh->proc[s];
        if (p->pid == 0 || p->used[idx] == 0 || !(p->contexts & kind))
            continue;
        if (found < room) {
            infos[found].pid = (unsigned)p->pid;
            infos[found].usedGpuMemory = p->used[idx];
            infos[found].gpuInstanceId = infos[found].computeInstanceId = 0xFFFFFFFFu;
        }
        found++;
    }
    si_unlock(n);
    *count = found;
    return found > room ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *count,
                                                              nvmlProcessInfo_t *infos) {
    return processes(d, count, infos, SI_CTX_COMPUTE);
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned *count,
                                                              nvmlProcessInfo_t *infos) {
    return processes(d, count, infos, SI_CTX_COMPUTE);
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned *count,
                                                               nvmlProcessInfo_t *infos) {
    return processes(d, count, infos, SI_CTX_GRAPHICS);
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned *count,
                                                               nvmlProcessInfo_t *infos) {
    return processes(d, count, infos, SI_CTX_GRAPHICS);
}

/* No MPS control daemon runs on the simulated node, so no process has an MPS compute context:
 * the list is empty (NVML_SUCCESS, "if none are running", with a count of 0). */
SI_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *count,
                                                                 nvmlProcessInfo_t *infos) {
    return processes(d, count, infos, 0);
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t d, unsigned *count,
                                                                 nvmlProcessInfo_t *infos) {
    return processes(d, count, infos, 0);
}

/* ---- events ---- */

struct si_evset {
    uint64_t mask[SI_MAX_GPUS];
    uint64_t seen[SI_MAX_GPUS];
};

SI_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *t) {
    SI_GPU_OR_RETURN(d)
    if (!t)
        return NVML_ERROR_INVALID_ARGUMENT;
    *t = NVML_EVENT_XID_CRITICAL;
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    nvmlReturn_t rc;
    if (!si_nv_node(&rc))
        return rc;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    *set = calloc(1, sizeof(struct si_evset));
    return *set ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

SI_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types,
                                                nvmlEventSet_t set) {
    SI_GPU_OR_RETURN(d)
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (types & ~NVML_EVENT_XID_CRITICAL)
        return NVML_ERROR_NOT_SUPPORTED;
    struct si_shared *sh = si_lock(n);
    set->mask[idx] |= types;
    set->seen[idx] = sh->gpu[idx].xseq; /* only events after registration are delivered */
    si_unlock(n);
    return NVML_SUCCESS;
}

static int next_event(struct si_node *n, nvmlEventSet_t set, nvmlEventData_t *data) {
    struct si_shared *sh = si_lock(n);
    int found = 0;
    for (int g = 0; g < n->cfg.ngpus && !found; g++) {
        struct si_gpu_state *gs = &sh->gpu[g];
        if (!set->mask[g] || gs->xseq == set->seen[g])
            continue;
        if (gs->xseq - set->seen[g] > SI_XRING) /* missed some: deliver the oldest kept */
            set->seen[g] = gs->xseq - SI_XRING;
        const struct si_xid *x = &gs->xring[set->seen[g] % SI_XRING];
        set->seen[g]++;
        memset(data, 0, sizeof(*data));
        data->device = si_nv_handle(g);
        data->eventType = NVML_EVENT_XID_CRITICAL;
        data->eventData = x->xid;
        data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
        found = 1;
    }
    si_unlock(n);
    return found;
}

SI_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                           unsigned timeout_ms) {
    nvmlReturn_t rc;
    struct si_node *n = si_nv_node(&rc);
    if (!n)
        return rc;
    if (!set || !data)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t deadline = si_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        if (next_event(n, set, data))
            return NVML_SUCCESS;
        uint64_t now = si_now_ns();
        if (now >= deadline)
            return NVML_ERROR_TIMEOUT;
        si_sleep_until(now + 5000000ull < deadline ? now + 5000000ull : deadline);
    }
}

SI_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    free(set);
    return NVML_SUCCESS;
}
