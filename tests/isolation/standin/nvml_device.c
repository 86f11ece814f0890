/* Stand-in libnvidia-ml.so.1: initialisation, device handles and static device facts. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nvml_local.h"

static int refs;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct si_nvdev handles[SI_MAX_GPUS];

struct si_node *si_nv_node(nvmlReturn_t *rc) {
    pthread_mutex_lock(&mu);
    int up = refs > 0;
    pthread_mutex_unlock(&mu);
    struct si_node *n = up ? si_node(NULL, 0) : NULL;
    *rc = n ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    return n;
}

nvmlDevice_t si_nv_handle(int index) { return &handles[index]; }

nvmlReturn_t si_nv_dev(nvmlDevice_t d, struct si_node **n, int *index) {
    nvmlReturn_t rc;
    *n = si_nv_node(&rc);
    if (!*n)
        return rc;
    if (d < handles || d >= handles + (*n)->cfg.ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = d->index;
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned flags) {
    char err[512];
    (void)flags;
    struct si_node *n = si_node(err, sizeof(err));
    if (!n) {
        fprintf(stderr, "%s\n", err);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    pthread_mutex_lock(&mu);
    for (int i = 0; i < SI_MAX_GPUS; i++)
        handles[i].index = i;
    refs++;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

SI_EXPORT nvmlReturn_t nvmlShutdown(void) {
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&mu);
    if (refs == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else
        refs--;
    pthread_mutex_unlock(&mu);
    return rc;
}

SI_EXPORT const char *nvmlErrorString(nvmlReturn_t rc) {
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t copy_out(char *buf, unsigned len, const char *s) {
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned len) {
    nvmlReturn_t rc;
    struct si_node *n = si_nv_node(&rc);
    return n ? copy_out(buf, len, n->cfg.driver_version) : rc;
}

SI_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    nvmlReturn_t rc;
    struct si_node *n = si_nv_node(&rc);
    if (n && !version)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (n)
        *version = n->cfg.cuda_version;
    return rc;
}

SI_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    return nvmlSystemGetCudaDriverVersion(version);
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count) {
    nvmlReturn_t rc;
    struct si_node *n = si_nv_node(&rc);
    if (n && !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (n)
        *count = (unsigned)n->cfg.ngpus;
    return rc;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *d) {
    nvmlReturn_t rc;
    struct si_node *n = si_nv_node(&rc);
    if (!n)
        return rc;
    if (!d || index >= (unsigned)n->cfg.ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *d = si_nv_handle((int)index);
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
    nvmlReturn_t rc;
    struct si_node *n = si_nv_node(&rc);
    if (!n)
        return rc;
    if (!uuid || !d)
        return NVML_ERROR_INVALID_ARGUMENT;
    int i = si_gpu_by_uuid(&n->cfg, uuid);
    if (i < 0)
        return NVML_ERROR_NOT_FOUND;
    *d = si_nv_handle(i);
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pci, nvmlDevice_t *d) {
    nvmlReturn_t rc;
    struct si_node *n = si_nv_node(&rc);
    if (!n)
        return rc;
    if (!pci || !d)
        return NVML_ERROR_INVALID_ARGUMENT;
    int i = si_gpu_by_pci(&n->cfg, pci);
    if (i < 0)
        return NVML_ERROR_NOT_FOUND;
    *d = si_nv_handle(i);
    return NVML_SUCCESS;
}

#define SI_GPU_OR_RETURN(d)                                                                      \
    struct si_node *n;                                                                           \
    int idx;                                                                                     \
    nvmlReturn_t rc = si_nv_dev(d, &n, &idx);                                                    \
    if (rc != NVML_SUCCESS)                                                                      \
        return rc;                                                                               \
    const struct si_gpu_cfg *g = &n->cfg.gpu[idx];

SI_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned len) {
    SI_GPU_OR_RETURN(d)
    return copy_out(buf, len, g->uuid);
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned len) {
    SI_GPU_OR_RETURN(d)
    return copy_out(buf, len, g->name);
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned *index) {
    SI_GPU_OR_RETURN(d)
    (void)g;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)idx;
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned *minor) {
    return nvmlDeviceGetIndex(d, minor); /* /dev/nvidiaN follows the index here */
}

static void pci_info(const struct si_gpu_cfg *g, nvmlPciInfo_t *p) {
    memset(p, 0, sizeof(*p));
    sscanf(g->pci, "%x:%x:%x", &p->domain, &p->bus, &p->device);
    snprintf(p->busId, sizeof(p->busId), "%s", g->pci);
    snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "%04X:%02X:%02X.0", p->domain & 0xffff,
             p->bus, p->device);
    p->pciDeviceId = 0x1EB810DE; /* device id 0x1EB8, NVIDIA's vendor id 0x10DE */
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    SI_GPU_OR_RETURN(d)
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    pci_info(g, pci);
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d, unsigned *node) {
    SI_GPU_OR_RETURN(d)
    if (!node)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->numa < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *node = (unsigned)g->numa;
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
    SI_GPU_OR_RETURN(d)
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = g->cc_major;
    *minor = g->cc_minor;
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *current, unsigned *pending) {
    SI_GPU_OR_RETURN(d)
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->mig < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned)g->mig;
    return NVML_SUCCESS;
}

static int peer_index(const struct si_gpu_cfg *g, const struct si_config *cfg, int link) {
    return link < g->npeers ? si_gpu_by_uuid(cfg, g->peers[link]) : -1;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, unsigned *active) {
    SI_GPU_OR_RETURN(d)
    if (!active || link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->npeers == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *active = (int)link < g->npeers;
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link,
                                                         nvmlPciInfo_t *pci) {
    SI_GPU_OR_RETURN(d)
    if (!pci || link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    int peer = peer_index(g, &n->cfg, (int)link);
    if (peer < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    pci_info(&n->cfg.gpu[peer], pci);
    return NVML_SUCCESS;
}

SI_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps,
                                              int *status) {
    SI_GPU_OR_RETURN(a)
    struct si_node *n2;
    int other;
    if (si_nv_dev(b, &n2, &other) != NVML_SUCCESS || !status || caps < 0 || caps > 6)
        return NVML_ERROR_INVALID_ARGUMENT;
    *status = 0; /* NVML_P2P_STATUS_OK: every pair reaches the other over PCIe */
    if (caps == 2) { /* NVML_P2P_CAPS_INDEX_NVLINK */
        *status = 5; /* NVML_P2P_STATUS_NOT_SUPPORTED */
        for (int i = 0; i < g->npeers; i++)
            if (strcmp(g->peers[i], n->cfg.gpu[other].uuid) == 0)
                *status = 0;
    }
    return NVML_SUCCESS;
}
