/* A driver-API program for the context-limit tests: the limits that size a buffer of the context
 * in device memory (CU_LIMIT_STACK_SIZE 0, CU_LIMIT_PRINTF_FIFO_SIZE 1, CU_LIMIT_MALLOC_HEAP_SIZE
 * 2), set and read back, between allocations and the context's end. Prototypes in cudrv.h (from
 * NVIDIA's public Driver API reference); linked against libcuda.so.1 by name.
 *
 *   ctxlimit DEV STEP...   on DEV's primary context, each STEP in turn:
 *     set:LIMIT:VALUE      cuCtxSetLimit                                  "set RC"
 *     proc:LIMIT:VALUE     the same through cuGetProcAddress              "proc RC"
 *     sym:LIMIT:VALUE      the same through dlsym on libcuda.so.1         "sym RC"
 *     get:LIMIT            cuCtxGetLimit                                  "get RC VALUE"
 *     alloc:BYTES          cuMemAlloc_v2, freed at once                   "alloc RC"
 *     info                 the free memory cuMemGetInfo_v2 reports        "info FREE"
 *     module               loads a module into the current context        "module RC"
 *     ctx                  cuCtxCreate_v2 on DEV (then current)           "ctx RC"
 *     destroy              cuCtxDestroy_v2 of that context; primary again "destroy RC"
 *     reset                cuDevicePrimaryCtxReset_v2, then retained again "reset RC"
 *     hold                 prints "hold" and waits for a line on stdin */
#include <dlfcn.h>

#include "cudrv.h"

typedef CUresult (*set_limit_fn)(int, size_t);

static CUresult through_proc(int limit, size_t value)
{
    void *fn = NULL;
    CUresult rc = cuGetProcAddress("cuCtxSetLimit", &fn, 12000, 0);
    return rc ? rc : ((set_limit_fn)fn)(limit, value);
}

static CUresult through_dlsym(int limit, size_t value)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    void *fn = lib ? dlsym(lib, "cuCtxSetLimit") : NULL;
    return fn ? ((set_limit_fn)fn)(limit, value) : 500; /* CUDA_ERROR_NOT_FOUND */
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ctxlimit DEV STEP...\n");
        return 2;
    }
    int dev = atoi(argv[1]);
    CUcontext created = NULL;
    check(cuInit(0), "cuInit");
    use_device(dev);
    for (int i = 2; i < argc; i++) {
        int limit = 0;
        unsigned long long value = 0;
        size_t got = 0;
        const char *step = argv[i];
        if (sscanf(step, "set:%d:%llu", &limit, &value) == 2)
            printf("set %d\n", cuCtxSetLimit(limit, (size_t)value));
        else if (sscanf(step, "proc:%d:%llu", &limit, &value) == 2)
            printf("proc %d\n", through_proc(limit, (size_t)value));
        else if (sscanf(step, "sym:%d:%llu", &limit, &value) == 2)
            printf("sym %d\n", through_dlsym(limit, (size_t)value));
        else if (sscanf(step, "get:%d", &limit) == 1) {
            CUresult rc = cuCtxGetLimit(&got, limit);
            printf("get %d %zu\n", rc, got);
        } else if (sscanf(step, "alloc:%llu", &value) == 1)
            try_alloc("alloc", (size_t)value);
        else if (!strcmp(step, "info")) {
            size_t free_b = 0, total = 0;
            CUresult rc = cuMemGetInfo_v2(&free_b, &total);
            printf("info %zu\n", rc ? 0 : free_b);
        } else if (!strcmp(step, "module")) {
            CUmodule mod;
            printf("module %d\n", cuModuleLoadData(&mod, "a module"));
        } else if (!strcmp(step, "ctx"))
            printf("ctx %d\n", cuCtxCreate_v2(&created, 0, dev));
        else if (!strcmp(step, "destroy")) {
            printf("destroy %d\n", cuCtxDestroy_v2(created));
            use_device(dev);
        } else if (!strcmp(step, "reset")) {
            printf("reset %d\n", cuDevicePrimaryCtxReset_v2(dev));
            use_device(dev);
        } else if (!strcmp(step, "hold")) {
            char line[8];
            printf("hold\n");
            fflush(stdout);
            if (!fgets(line, sizeof line, stdin))
                return 0;
        } else {
            fprintf(stderr, "ctxlimit: unknown step %s\n", step);
            return 2;
        }
        fflush(stdout);
    }
    return 0;
}
