/* vgpu-standin-ctl: a test's handle on the simulated node (not part of any NVIDIA API).
 *
 *   vgpu-standin-ctl xid UUID XID   inject an XID event on that GPU (NVML event sets see it)
 *   vgpu-standin-ctl usage          one line per fact, for tests to parse:
 *       gpu UUID used BYTES
 *       proc UUID PID BYTES         memory a live process holds
 *       busy UUID PID NS            kernel time a process has queued on the GPU's timeline,
 *                                   kept after it exits
 *   vgpu-standin-ctl window UUID FROM TO PID...
 *                                   ns each PID's kernels ran on that GPU in [FROM, TO)
 *                                   (CLOCK_MONOTONIC ns), one number a line, then the GPU's */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

static int inject(struct si_node *n, const char *uuid, const char *xid) {
    int g = si_gpu_by_uuid(&n->cfg, uuid);
    if (g < 0) {
        fprintf(stderr, "vgpu-standin-ctl: no GPU %s in the config\n", uuid);
        return 2;
    }
    struct si_shared *sh = si_lock(n);
    struct si_gpu_state *gs = &sh->gpu[g];
    gs->xring[gs->xseq % SI_XRING].xid = strtoull(xid, NULL, 10);
    gs->xring[gs->xseq % SI_XRING].seq = gs->xseq;
    gs->xseq++;
    si_unlock(n);
    return 0;
}

static void usage_report(struct si_node *n) {
    struct si_shared *sh = si_lock(n);
    for (int g = 0; g < n->cfg.ngpus; g++) {
        const char *uuid = n->cfg.gpu[g].uuid;
        printf("gpu %s used %llu\n", uuid, (unsigned long long)sh->gpu[g].used);
        for (int s = 0; s < SI_MAX_PROCS; s++)
            if (sh->proc[s].pid && sh->proc[s].used[g])
                printf("proc %s %d %llu\n", uuid, sh->proc[s].pid,
                       (unsigned long long)sh->proc[s].used[g]);
        for (int b = 0; b < SI_MAX_BUSY; b++)
            if (sh->busy[b].pid && sh->busy[b].ns[g])
                printf("busy %s %d %llu\n", uuid, sh->busy[b].pid,
                       (unsigned long long)sh->busy[b].ns[g]);
    }
    si_unlock(n);
}

static int window(struct si_node *n, int argc, char **argv) {
    int g = si_gpu_by_uuid(&n->cfg, argv[2]);
    if (g < 0) {
        fprintf(stderr, "vgpu-standin-ctl: no GPU %s in the config\n", argv[2]);
        return 2;
    }
    uint64_t from = strtoull(argv[3], NULL, 10), to = strtoull(argv[4], NULL, 10);
    struct si_shared *sh = si_lock(n);
    for (int i = 5; i <= argc; i++)
        printf("%llu\n", (unsigned long long)si_busy_window(sh, g, i < argc ? atoi(argv[i]) : 0,
                                                           from, to));
    si_unlock(n);
    return 0;
}

int main(int argc, char **argv) {
    char err[512];
    struct si_node *n = si_node(err, sizeof(err));
    if (!n) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (argc == 4 && strcmp(argv[1], "xid") == 0)
        return inject(n, argv[2], argv[3]);
    if (argc == 2 && strcmp(argv[1], "usage") == 0) {
        usage_report(n);
        return 0;
    }
    if (argc >= 5 && strcmp(argv[1], "window") == 0)
        return window(n, argc, argv);
    fprintf(stderr, "usage: vgpu-standin-ctl xid UUID XID | usage | window UUID FROM TO PID...\n");
    return 2;
}
