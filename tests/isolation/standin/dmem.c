/* The driver's own per-cgroup device-memory limits ("MPS v3 Memory Partitioning", NVIDIA's MPS
 * documentation, releases 615 and 620), modelled on its dmem backend:
 *
 * - a limit belongs to a cgroup v2 directory: its hard limit is the GPU's line in `dmem.max`,
 *   its soft limit the line in `dmem.min` ("Under the dmem controller: hard limit maps to
 *   dmem.max ... soft limit maps to dmem.min"); a line reads `nvidia/<pci>/vidmem <bytes|max>`
 *   and `<cgroupfs>/dmem.capacity` lists one such region per GPU the driver registered;
 * - "It is enforced at allocation time; an allocation that would exceed it fails with an
 *   out-of-memory error", over all device memory, contexts included (same page), for every
 *   process of the cgroup and of its descendants: the kernel's dmem controller charges a page
 *   counter up the hierarchy with memory-cgroup semantics (kernel commit "kernel/cgroup: Add
 *   \"dmem\" memory accounting cgroup"), and the open driver charges each allocation to the cgroup
 *   of the process that owns it, not to an MPS client (open-gpu-kernel-modules,
 *   src/nvidia/src/kernel/mem_mgr/memacct.c, memacctTryCharge);
 * - a process's cgroup is the "0::" line of /proc/self/cgroup (cgroup v2).
 *
 * Only the hard limit is enforced here: a soft limit only marks a client for eviction "under real
 * memory pressure", which the stand-in never simulates. */
#include <stdio.h>
#include <string.h>

#include "standin.h"

void si_cgroup_self(char *out, size_t len) {
    char line[SI_CGROUP_LEN + 8];
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\r\n")] = '\0';
            snprintf(out, len, "%s", line + 3);
            break;
        }
    }
    fclose(f);
}

/* `nvidia/0000:3b:00.0/vidmem`: the PCI address in sysfs form (4-digit domain, lower case). */
void si_dmem_region(const struct si_config *cfg, int gpu, char *out, size_t len) {
    const char *pci = cfg->gpu[gpu].pci;
    size_t n = strlen(pci);
    char low[32];
    const char *tail = n > 12 ? pci + (n - 12) : pci;
    size_t i = 0;
    for (; tail[i] && i + 1 < sizeof(low); i++)
        low[i] = (char)(tail[i] >= 'A' && tail[i] <= 'F' ? tail[i] - 'A' + 'a' : tail[i]);
    low[i] = '\0';
    snprintf(out, len, "nvidia/%s/vidmem", low);
}

/* `region`'s value in `dir/file`: 1 and *bytes for a number, 0 for `max` or no such line or
 * file, -1 for a line that is not a value. */
int si_dmem_limit(const char *dir, const char *file, const char *region, uint64_t *bytes) {
    char path[600], line[256], name[160], value[64];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    int found = 0;
    if (!f)
        return 0;
    while (found == 0 && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%159s %63s", name, value) != 2 || strcmp(name, region) != 0)
            continue;
        unsigned long long v = 0;
        char extra;
        if (strcmp(value, "max") == 0)
            break;
        found = sscanf(value, "%llu%c", &v, &extra) == 1 ? 1 : -1;
        *bytes = v;
    }
    fclose(f);
    return found;
}

/* Device memory of GPU `gpu` held by live processes of `cgroup` and its descendants. */
uint64_t si_dmem_used(struct si_shared *sh, int gpu, const char *cgroup) {
    size_t len = strlen(cgroup);
    int root = strcmp(cgroup, "/") == 0;
    uint64_t total = 0;
    for (int s = 0; s < SI_MAX_PROCS; s++) {
        const char *mine = sh->proc[s].cgroup;
        if (sh->proc[s].pid == 0)
            continue;
        if (root || (strncmp(mine, cgroup, len) == 0 && (mine[len] == '\0' || mine[len] == '/')))
            total += sh->proc[s].used[gpu];
    }
    return total;
}

/* 1 if `bytes` more for the process in `slot` stays within the hard limit of its cgroup and of
 * every ancestor (a page counter charges them all); under the state lock. */
int si_dmem_allows(struct si_node *n, int gpu, int slot, uint64_t bytes) {
    char region[64], group[SI_CGROUP_LEN], dir[600];
    if (!n->cfg.cgroupfs[0])
        return 1;
    si_dmem_region(&n->cfg, gpu, region, sizeof(region));
    snprintf(group, sizeof(group), "%s", n->sh->proc[slot].cgroup);
    while (group[0] == '/' && group[1] != '\0') { /* the root cgroup has no dmem.max */
        uint64_t hard = 0;
        snprintf(dir, sizeof(dir), "%s%s", n->cfg.cgroupfs, group);
        int limited = si_dmem_limit(dir, "dmem.max", region, &hard);
        if (limited < 0)
            return 0; /* fail closed on a limit that cannot be read */
        if (limited > 0) {
            uint64_t used = si_dmem_used(n->sh, gpu, group);
            if (used > hard || bytes > hard - used)
                return 0;
        }
        char *cut = strrchr(group, '/');
        if (cut == group)
            cut[1] = '\0';
        else
            *cut = '\0';
    }
    return 1;
}
