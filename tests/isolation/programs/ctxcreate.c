/* A driver-API program for the context-creation tests: a context created by one of the forms of
 * cuCtxCreate (CUDA Driver API reference), reached as a program would reach it, then used.
 * Prototypes in cudrv.h and below (from NVIDIA's public Driver API reference); linked against
 * libcuda.so.1 by name.
 *
 *   ctxcreate FORM:VIA DEV STEP...
 *     FORM   v1 (cuCtxCreate, CUDA 3.1 and before), v2 (cuCtxCreate_v2), v3 (cuCtxCreate_v3,
 *            CUDA 11.4: no execution affinity) or v4 (cuCtxCreate_v4, CUDA 12.5: a
 *            CUctxCreateParams with neither affinity nor CIG parameters)
 *     VIA    link (the symbol, linked), proc ("cuCtxCreate" through cuGetProcAddress at the
 *            version that hands out FORM) or sym (the symbol through dlsym on libcuda.so.1)
 *   prints "create RC", then, if the context was created (it is current), each STEP in turn:
 *     alloc:BYTES          cuMemAlloc_v2, kept                            "alloc RC"
 *     array:BYTES          cuArrayCreate_v2 of BYTES 8-bit texels, kept   "array RC"
 *     info                 the free memory cuMemGetInfo_v2 reports        "info FREE"
 *     destroy              cuCtxDestroy_v2 of the context FORM created    "destroy RC"
 *     create               FORM:VIA again on DEV, made current            "create RC"
 *     primary              DEV's primary context retained, made current   "primary RC"
 *     reset                cuDevicePrimaryCtxReset_v2 on DEV              "reset RC"
 *     release              cuDevicePrimaryCtxRelease_v2 on DEV            "release RC"
 *   Nothing is freed before the program exits but what a step destroys. */
#include <dlfcn.h>

#include "cudrv.h"

typedef struct { /* CUexecAffinityParam: its type, then a union of one unsigned int */
    int type;
    unsigned value;
} ExecAffinity;
typedef struct { /* CUctxCreateParams */
    ExecAffinity *exec_affinity;
    int nexec_affinity;
    void *cig; /* CUctxCigParam * */
} CtxCreateParams;

CUresult cuCtxCreate(CUcontext *, unsigned, CUdevice);
CUresult cuCtxCreate_v3(CUcontext *, ExecAffinity *, int, unsigned, CUdevice);
CUresult cuCtxCreate_v4(CUcontext *, CtxCreateParams *, unsigned, CUdevice);

typedef struct { /* CUDA_ARRAY_DESCRIPTOR */
    size_t width, height;
    int format; /* CUarray_format: 0x01 is CU_AD_FORMAT_UNSIGNED_INT8 */
    unsigned channels;
} ArrayDesc;
CUresult cuArrayCreate_v2(CUarray *, const ArrayDesc *);

typedef CUresult (*create_fn)(CUcontext *, unsigned, CUdevice);
typedef CUresult (*create3_fn)(CUcontext *, ExecAffinity *, int, unsigned, CUdevice);
typedef CUresult (*create4_fn)(CUcontext *, CtxCreateParams *, unsigned, CUdevice);

static const struct {
    const char *form, *symbol;
    int version; /* the cuGetProcAddress version that hands this form out for "cuCtxCreate" */
    void *linked;
} forms[] = {
    {"v1", "cuCtxCreate", 3010, (void *)cuCtxCreate},
    {"v2", "cuCtxCreate_v2", 3020, (void *)cuCtxCreate_v2},
    {"v3", "cuCtxCreate_v3", 11040, (void *)cuCtxCreate_v3},
    {"v4", "cuCtxCreate_v4", 12050, (void *)cuCtxCreate_v4},
};

static CUresult create(const char *how, CUcontext *ctx, CUdevice dev)
{
    char form[8] = "", via[8] = "";
    void *fn = NULL;
    int i = 0, n = (int)(sizeof forms / sizeof forms[0]);
    if (sscanf(how, "%7[^:]:%7s", form, via) != 2)
        return -1;
    while (i < n && strcmp(forms[i].form, form))
        i++;
    if (i == n)
        return -1;
    if (!strcmp(via, "link"))
        fn = forms[i].linked;
    else if (!strcmp(via, "proc")) {
        CUresult rc = cuGetProcAddress("cuCtxCreate", &fn, forms[i].version, 0);
        if (rc)
            return rc;
    } else if (!strcmp(via, "sym")) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        fn = lib ? dlsym(lib, forms[i].symbol) : NULL;
    } else
        return -1;
    if (!fn)
        return 500; /* CUDA_ERROR_NOT_FOUND */
    if (i <= 1)
        return ((create_fn)fn)(ctx, 0, dev);
    if (i == 2)
        return ((create3_fn)fn)(ctx, NULL, 0, 0, dev);
    CtxCreateParams params = {NULL, 0, NULL};
    return ((create4_fn)fn)(ctx, &params, 0, dev);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ctxcreate FORM:VIA DEV STEP...\n");
        return 2;
    }
    CUcontext ctx = NULL;
    CUdevice dev = atoi(argv[2]);
    check(cuInit(0), "cuInit");
    CUresult rc = create(argv[1], &ctx, dev);
    if (rc == -1) {
        fprintf(stderr, "ctxcreate: unknown form %s\n", argv[1]);
        return 2;
    }
    printf("create %d\n", rc);
    for (int i = 3; i < argc && rc == 0; i++) {
        unsigned long long value = 0;
        if (sscanf(argv[i], "alloc:%llu", &value) == 1) {
            CUdeviceptr p;
            printf("alloc %d\n", cuMemAlloc_v2(&p, (size_t)value));
        } else if (sscanf(argv[i], "array:%llu", &value) == 1) {
            CUarray array;
            ArrayDesc desc = {(size_t)value, 0, 0x01, 1};
            printf("array %d\n", cuArrayCreate_v2(&array, &desc));
        } else if (!strcmp(argv[i], "destroy")) {
            printf("destroy %d\n", cuCtxDestroy_v2(ctx));
        } else if (!strcmp(argv[i], "create")) {
            printf("create %d\n", create(argv[1], &ctx, dev));
        } else if (!strcmp(argv[i], "primary")) {
            CUcontext primary = NULL;
            CUresult got = cuDevicePrimaryCtxRetain(&primary, dev);
            printf("primary %d\n", got ? got : cuCtxSetCurrent(primary));
        } else if (!strcmp(argv[i], "reset")) {
            printf("reset %d\n", cuDevicePrimaryCtxReset_v2(dev));
        } else if (!strcmp(argv[i], "release")) {
            printf("release %d\n", cuDevicePrimaryCtxRelease_v2(dev));
        } else if (!strcmp(argv[i], "info")) {
            size_t free_b = 0, total = 0;
            CUresult got = cuMemGetInfo_v2(&free_b, &total);
            printf("info %zu\n", got ? 0 : free_b);
        } else {
            fprintf(stderr, "ctxcreate: unknown step %s\n", argv[i]);
            return 2;
        }
        fflush(stdout);
    }
    return 0;
}
