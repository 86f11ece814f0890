/* Internal interface shared by the stand-in libcuda.so.1 and libnvidia-ml.so.1.
 *
 * Both libraries simulate ONE node: a small text config names the GPUs, and a memory-mapped
 * state file (path named in the config) holds what several processes must agree on: memory in
 * use per GPU, each GPU's timeline, per-process busy time, injected XID events. Everything here
 * has hidden visibility, so the two libraries loaded into one process never see each other's
 * copies (and -Wl,-Bsymbolic keeps their own calls internal). */
#ifndef VGPU_STANDIN_H
#define VGPU_STANDIN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SI_HIDDEN __attribute__((visibility("hidden")))
#define SI_EXPORT __attribute__((visibility("default")))

#define SI_MAX_GPUS 16
#define SI_MAX_PEERS 8
#define SI_MAX_PROCS 256  /* live processes using the node at once */
#define SI_MAX_ALLOCS 8192
#define SI_MAX_BUSY 512   /* per-pid busy records, kept after the process exits */
#define SI_KRING 8192     /* recent kernels per GPU: those queued, and the latest done */
#define SI_XRING 32       /* recent XID events per GPU */
#define SI_DEFAULT_CONFIG "/etc/vgpu-standin/gpus"
#define SI_CONFIG_ENV "VGPU_STANDIN_CONFIG"
#define SI_CGROUP_LEN 256 /* a cgroup v2 path, as /proc/self/cgroup's "0::" line names it */

struct si_gpu_cfg {
    char uuid[48];
    char name[64];
    char pci[32]; /* NVML form: 00000000:3B:00.0 */
    uint64_t memory;
    int numa;      /* -1: none */
    int mig;       /* -1: MIG not supported, 0 off, 1 on */
    int sms;
    int cc_major, cc_minor;
    int npeers;
    char peers[SI_MAX_PEERS][48];
};

struct si_config {
    char state_path[256];
    char driver_version[32];
    char cgroupfs[256]; /* where cgroup v2 is mounted; "": no per-cgroup memory limits */
    int cuda_version;       /* 1000 * major + 10 * minor */
    uint64_t context_bytes; /* device memory one context takes */
    int ngpus;
    struct si_gpu_cfg gpu[SI_MAX_GPUS];
};

enum si_kind {
    SI_FREE = 0,
    SI_MEM,
    SI_CONTEXT,
    SI_VMM,
    SI_POOL,
    SI_HOLD,    /* an import: no bytes */
    SI_EXPORTED /* VMM memory only its exported descriptors hold (pins.c): no process's */
};

struct si_alloc {
    uint64_t ptr; /* fake device address or VMM handle */
    uint64_t bytes;
    int32_t proc; /* slot index */
    int32_t gpu;
    int32_t kind;
    int32_t pad; /* SI_VMM, SI_EXPORTED: how many files it was exported as (pins.c) */
};

/* The kinds of context a process holds its device memory through (si_proc.contexts), which
 * decide the NVML lists it appears in (nvml_usage.c). A process's kind is chosen at registration
 * by the knob VGPU_STANDIN_CONTEXT (node.c, si_register). */
#define SI_CTX_COMPUTE 0x1  /* a CUDA context: the compute process list */
#define SI_CTX_GRAPHICS 0x2 /* an OpenGL/Vulkan one: the graphics process list */

struct si_proc {
    int32_t pid;      /* 0: slot free */
    int32_t contexts; /* SI_CTX_* bits */
    uint64_t used[SI_MAX_GPUS];
    char cgroup[SI_CGROUP_LEN]; /* the process's cgroup at registration */
};

struct si_busy {
    int32_t pid;
    int32_t pad;
    uint64_t seq; /* for replacing the oldest record when full */
    uint64_t ns[SI_MAX_GPUS];
};

struct si_kernel {
    uint64_t start, end; /* CLOCK_MONOTONIC ns: its span on the timeline (0: not yet) */
    uint64_t work;       /* ns of GPU time it takes */
    uint64_t left;       /* ns of it still to run */
    int32_t pid;
    int32_t pad;
};

struct si_xid {
    uint64_t seq;
    uint64_t xid;
};

struct si_gpu_state {
    uint64_t used;
    uint64_t sim_ns; /* the timeline is simulated up to here */
    uint64_t next_va;
    uint64_t khead;  /* kernels queued so far; kernel i (a ticket is i + 1) is kring[i % KRING] */
    uint64_t kfirst; /* every kernel before this one is done */
    int32_t nqueued; /* processes with kernels queued, and how many each */
    int32_t pad;
    struct {
        int32_t pid;
        uint32_t kernels;
    } queued[SI_MAX_PROCS];
    struct si_kernel kring[SI_KRING];
    uint64_t xseq; /* XIDs injected so far */
    struct si_xid xring[SI_XRING];
};

struct si_shared {
    uint64_t magic;
    pthread_mutex_t lock; /* robust, process-shared */
    uint64_t busy_seq;
    int32_t exported; /* alloc records of kind SI_EXPORTED, and of kind SI_HOLD: the scans for */
    int32_t holds;    /* them run only while there are some (a launch takes the lock four times) */
    int32_t proc_top; /* every slot at or past it has always been free: si_reap looks below */
    int32_t pad;
    struct si_gpu_state gpu[SI_MAX_GPUS];
    struct si_proc proc[SI_MAX_PROCS];
    struct si_alloc alloc[SI_MAX_ALLOCS];
    struct si_busy busy[SI_MAX_BUSY];
};

/* config.c */
SI_HIDDEN int si_config_load(struct si_config *cfg, char *err, size_t errlen);
SI_HIDDEN int si_gpu_by_uuid(const struct si_config *cfg, const char *uuid);
SI_HIDDEN int si_gpu_by_pci(const struct si_config *cfg, const char *pci);

/* node.c: the process's view of the node (config + mapped state), loaded once */
struct si_node {
    struct si_config cfg;
    struct si_shared *sh;
    int fd;
    int slot; /* this process's proc slot, -1 until registered */
    int pid;
};
SI_HIDDEN struct si_node *si_node(char *err, size_t errlen);
SI_HIDDEN struct si_shared *si_lock(struct si_node *n);
SI_HIDDEN void si_unlock(struct si_node *n);
SI_HIDDEN int si_register(struct si_node *n); /* under lock; returns slot or -1 */
SI_HIDDEN uint64_t si_now_ns(void);
SI_HIDDEN void si_sleep_until(uint64_t ns);

/* pool.c: memory and timeline, all under the lock */
SI_HIDDEN int si_mem_take(struct si_node *n, int gpu, uint64_t bytes, int kind, uint64_t *ptr);
SI_HIDDEN int si_mem_give(struct si_node *n, uint64_t ptr, int kind, int *gpu_out);
SI_HIDDEN void si_reap(struct si_node *n);
/* Shared VMM memory (cuda_vmm.c): an importing process's hold on the allocation `ptr`, and a
 * process letting go of its part (its hold, or the memory it is charged with, which passes to a
 * process still holding it or is freed). */
SI_HIDDEN int si_mem_hold(struct si_node *n, uint64_t ptr);
SI_HIDDEN void si_mem_let_go(struct si_node *n, uint64_t ptr);
SI_HIDDEN void si_mem_hand_over(struct si_node *n, struct si_alloc *a);
SI_HIDDEN void si_busy_add(struct si_shared *sh, int pid, int gpu, uint64_t ns);

/* pins.c: exported VMM descriptors as references to their memory. si_export_open makes the
 * next export file of the VMM allocation `ptr`, holding `rec`: its descriptor, or -1. */
SI_HIDDEN int si_export_open(struct si_node *n, uint64_t ptr, const void *rec, size_t len);
SI_HIDDEN int si_exports_open(struct si_node *n, const struct si_alloc *a);
SI_HIDDEN void si_exports_remove(struct si_node *n, const struct si_alloc *a);
SI_HIDDEN void si_exports_reap(struct si_node *n);

/* timeline.c: each GPU's time-sliced timeline. A queued kernel is named by a ticket (0: none). */
SI_HIDDEN uint64_t si_timeline_run(struct si_node *n, int gpu, uint64_t duration_ns,
                                   uint64_t after);
SI_HIDDEN int si_timeline_end(struct si_node *n, int gpu, uint64_t ticket, uint64_t *end);
SI_HIDDEN uint64_t si_timeline_wait(struct si_node *n, int gpu, uint64_t ticket);
SI_HIDDEN uint64_t si_busy_window(struct si_shared *sh, int gpu, int pid, uint64_t from,
                                  uint64_t to);
SI_HIDDEN uint64_t si_kernel_last(const struct si_shared *sh, int gpu, const struct si_kernel *k);

/* dmem.c: the driver's own per-cgroup memory limits (MPS v3 memory partitioning) */
SI_HIDDEN void si_cgroup_self(char *out, size_t len);
SI_HIDDEN void si_dmem_region(const struct si_config *cfg, int gpu, char *out, size_t len);
SI_HIDDEN int si_dmem_limit(const char *dir, const char *file, const char *region,
                            uint64_t *bytes);
SI_HIDDEN uint64_t si_dmem_used(struct si_shared *sh, int gpu, const char *cgroup);
SI_HIDDEN int si_dmem_allows(struct si_node *n, int gpu, int slot, uint64_t bytes);

#endif
