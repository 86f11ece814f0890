/* The simulated node's configuration: a small text file at a fixed path (tests bind-mount it into
 * a sandbox whose programs run under `env -i`), or at $VGPU_STANDIN_CONFIG for standalone use.
 *
 *   state /run/vgpu-standin/state        shared state file (default /tmp/vgpu-standin.state)
 *   driver 550.54.15 12040               NVML driver version string, CUDA driver version
 *   context 67108864                     device memory one CUDA context takes (default 64 MiB)
 *   cgroupfs /sys/fs/cgroup              where cgroup v2 is mounted; without it the driver has
 *                                        no per-cgroup memory limits (dmem.c)
 *   gpu UUID MEMORY PCI NUMA MIG PEERS SMS CC NAME...
 *
 * MIG is on, off or none (not MIG-capable); PEERS a comma list of NVLink peer UUIDs or -; NUMA -1
 * for none; CC like 7.5; NAME the rest of the line. '#' starts a comment line. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

static void defaults(struct si_config *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->state_path, sizeof(cfg->state_path), "/tmp/vgpu-standin.state");
    snprintf(cfg->driver_version, sizeof(cfg->driver_version), "550.54.15");
    cfg->cuda_version = 12040;
    cfg->context_bytes = 64ull << 20;
}

static int uuid_ok(const char *u) {
    if (strncmp(u, "GPU-", 4) != 0 || strlen(u) != 40)
        return 0;
    for (int i = 4; i < 40; i++) {
        int dash = (i == 12 || i == 17 || i == 22 || i == 27);
        if (dash ? u[i] != '-' : !isxdigit((unsigned char)u[i]))
            return 0;
    }
    return 1;
}

static int parse_peers(struct si_gpu_cfg *g, char *list) {
    if (strcmp(list, "-") == 0)
        return 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (g->npeers == SI_MAX_PEERS || !uuid_ok(tok))
            return -1;
        snprintf(g->peers[g->npeers++], sizeof(g->peers[0]), "%s", tok);
    }
    return 0;
}

static int parse_gpu(struct si_config *cfg, const char *rest) {
    struct si_gpu_cfg *g = &cfg->gpu[cfg->ngpus];
    char mig[8], peers[512];
    unsigned long long mem;
    int name_at = 0;
    memset(g, 0, sizeof(*g));
    if (cfg->ngpus == SI_MAX_GPUS)
        return -1;
    if (sscanf(rest, "%47s %llu %31s %d %7s %511s %d %d.%d %n", g->uuid, &mem, g->pci, &g->numa,
               mig, peers, &g->sms, &g->cc_major, &g->cc_minor, &name_at) != 9 || !name_at)
        return -1;
    g->memory = mem;
    g->mig = strcmp(mig, "on") == 0 ? 1 : strcmp(mig, "off") == 0 ? 0 : -1;
    if (!uuid_ok(g->uuid) || g->memory == 0 || g->sms <= 0 || parse_peers(g, peers) != 0)
        return -1;
    snprintf(g->name, sizeof(g->name), "%s", rest + name_at);
    g->name[strcspn(g->name, "\r\n")] = '\0';
    cfg->ngpus++;
    return 0;
}

static int parse_line(struct si_config *cfg, char *line) {
    char key[16];
    int at = 0;
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '#' || line[strspn(line, " \t")] == '\0')
        return 0;
    if (sscanf(line, "%15s %n", key, &at) != 1)
        return -1;
    const char *rest = line + at;
    if (strcmp(key, "gpu") == 0)
        return parse_gpu(cfg, rest);
    if (strcmp(key, "state") == 0)
        return sscanf(rest, "%255s", cfg->state_path) == 1 ? 0 : -1;
    if (strcmp(key, "cgroupfs") == 0)
        return sscanf(rest, "%255s", cfg->cgroupfs) == 1 ? 0 : -1;
    if (strcmp(key, "driver") == 0)
        return sscanf(rest, "%31s %d", cfg->driver_version, &cfg->cuda_version) == 2 ? 0 : -1;
    if (strcmp(key, "context") == 0) {
        unsigned long long b;
        if (sscanf(rest, "%llu", &b) != 1)
            return -1;
        cfg->context_bytes = b;
        return 0;
    }
    return -1;
}

int si_config_load(struct si_config *cfg, char *err, size_t errlen) {
    const char *path = getenv(SI_CONFIG_ENV);
    char line[1024];
    int lineno = 0;
    defaults(cfg);
    if (!path || !*path)
        path = SI_DEFAULT_CONFIG;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "vgpu-standin: cannot read %s (write it, or set %s)", path,
                 SI_CONFIG_ENV);
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        if (parse_line(cfg, line) != 0) {
            snprintf(err, errlen, "vgpu-standin: %s line %d is not valid (see config.c)", path,
                     lineno);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int si_gpu_by_uuid(const struct si_config *cfg, const char *uuid) {
    for (int i = 0; i < cfg->ngpus; i++)
        if (strcmp(cfg->gpu[i].uuid, uuid) == 0)
            return i;
    return -1;
}

int si_gpu_by_pci(const struct si_config *cfg, const char *pci) {
    /* Accept both the 8-digit and the 4-digit domain forms, any case. */
    for (int i = 0; i < cfg->ngpus; i++) {
        const char *mine = cfg->gpu[i].pci;
        size_t a = strlen(mine), b = strlen(pci);
        const char *tail = b <= a ? mine + (a - b) : NULL;
        if (tail && strcasecmp(tail, pci) == 0 && (b == a || a - b == 4))
            return i;
    }
    return -1;
}
