/* Stand-in nvmlDeviceSetMemoryLimits_v1 / nvmlDeviceGetMemoryLimits_v1 (NVML reference: "Set the
 * memory limits of the device for the cgroup partition ... For all products. For Linux only.
 * Requires root/admin permissions ... MIG handles are not supported"), over the dmem files that
 * dmem.c enforces. Modelled choices beyond the reference are marked as such. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvml_local.h"

/* The cgroup path below the cgroupfs mount that `name_space` names, or NULL when it names no
 * cgroup directory under it (modelled: NVML_ERROR_NOT_FOUND). */
static const char *below_mount(const struct si_config *cfg, const char *name_space) {
    size_t len = strlen(cfg->cgroupfs);
    struct stat st;
    if (strncmp(name_space, cfg->cgroupfs, len) != 0 ||
        (name_space[len] != '/' && name_space[len] != '\0'))
        return NULL;
    if (stat(name_space, &st) != 0 || !S_ISDIR(st.st_mode))
        return NULL;
    return name_space[len] ? name_space + len : "/";
}

/* The device's checks shared by both calls: a handle, a cgroup, a non-MIG device whose region
 * the driver registered ("requires ... a non-MIG device"; dmem.capacity lists the regions). */
static nvmlReturn_t target(nvmlDevice_t device, const char *name_space, struct si_node **n,
                           char *region, size_t len, const char **cgroup) {
    int index;
    uint64_t ignored;
    char capacity[300];
    nvmlReturn_t rc = si_nv_dev(device, n, &index);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!name_space)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((*n)->cfg.gpu[index].mig == 1 || !(*n)->cfg.cgroupfs[0])
        return NVML_ERROR_NOT_SUPPORTED;
    si_dmem_region(&(*n)->cfg, index, region, len);
    snprintf(capacity, sizeof(capacity), "%s/dmem.capacity", (*n)->cfg.cgroupfs);
    if (access(capacity, R_OK) != 0 ||
        si_dmem_limit((*n)->cfg.cgroupfs, "dmem.capacity", region, &ignored) != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    *cgroup = below_mount(&(*n)->cfg, name_space);
    return *cgroup ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND;
}

/* Rewrite `region`'s line of `dir/file` to `value`, keeping the other regions' lines. */
static int write_line(const char *dir, const char *file, const char *region, const char *value) {
    char path[600], tmp[620], line[256], name[160];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    snprintf(tmp, sizeof(tmp), "%s.standin.%d", path, (int)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out)
        return -1;
    FILE *in = fopen(path, "r");
    while (in && fgets(line, sizeof(line), in))
        if (sscanf(line, "%159s", name) == 1 && strcmp(name, region) != 0)
            fputs(line, out);
    if (in)
        fclose(in);
    fprintf(out, "%s %s\n", region, value);
    if (fclose(out) != 0)
        return -1;
    return rename(tmp, path);
}

SI_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device,
                                                    nvmlSetMemoryLimits_v1_t *limits) {
    struct si_node *n;
    char region[64], hard[32], soft[32];
    const char *cgroup;
    if (!limits)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = target(device, limits->nameSpace, &n, region, sizeof(region), &cgroup);
    if (rc != NVML_SUCCESS)
        return rc;
    if (strcmp(cgroup, "/") == 0) /* the root cgroup has no dmem.max (kernel dmem controller) */
        return NVML_ERROR_NOT_SUPPORTED;
    if (limits->hardLimit != NVML_DEVICE_MEMORY_LIMIT_MAX && limits->softLimit > limits->hardLimit)
        return NVML_ERROR_INVALID_ARGUMENT; /* modelled: a floor above the ceiling */
    if (limits->hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX)
        snprintf(hard, sizeof(hard), "max");
    else
        snprintf(hard, sizeof(hard), "%llu", limits->hardLimit);
    snprintf(soft, sizeof(soft), "%llu", limits->softLimit);
    if (write_line(limits->nameSpace, "dmem.max", region, hard) != 0 ||
        write_line(limits->nameSpace, "dmem.min", region, soft) != 0)
        return NVML_ERROR_NO_PERMISSION; /* modelled: the files could not be written */
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t device,
                                                    nvmlGetMemoryLimits_v1_t *limits) {
    struct si_node *n;
    char region[64];
    const char *cgroup;
    uint64_t hard = NVML_DEVICE_MEMORY_LIMIT_MAX, soft = 0;
    if (!limits)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = target(device, limits->nameSpace, &n, region, sizeof(region), &cgroup);
    if (rc != NVML_SUCCESS)
        return rc;
    /* "No limit is set when softLimit is 0 and hardLimit is NVML_DEVICE_MEMORY_LIMIT_MAX". */
    if (si_dmem_limit(limits->nameSpace, "dmem.max", region, &hard) < 0 ||
        si_dmem_limit(limits->nameSpace, "dmem.min", region, &soft) < 0)
        return NVML_ERROR_UNKNOWN;
    int index = (int)(device - si_nv_handle(0));
    struct si_shared *sh = si_lock(n);
    limits->currentUsed = si_dmem_used(sh, index, cgroup);
    si_unlock(n);
    limits->softLimit = soft;
    limits->hardLimit = hard;
    return NVML_SUCCESS;
}
