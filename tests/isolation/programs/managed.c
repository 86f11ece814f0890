/* A driver-API program for the managed-memory tests: a managed allocation on DEV's primary
 * context, then where it is asked to be (CUDA Driver API reference, Unified Addressing).
 * Prototypes in cudrv.h and below (from NVIDIA's public Driver API reference); linked against
 * libcuda.so.1 by name.
 *
 *   managed DEV BYTES STEP...   prints "alloc RC", then each STEP in turn:
 *     prefetch:D           cuMemPrefetchAsync to device D (-1: CU_DEVICE_CPU)   "prefetch RC"
 *     prefetch2:D          cuMemPrefetchAsync_v2 to device D (-1: the host)      "prefetch2 RC"
 *     proc:D               "cuMemPrefetchAsync" through cuGetProcAddress at 12020 (the _v2
 *                          form), to device D                                   "proc RC"
 *     advise:ADVICE:D      cuMemAdvise of the whole range                       "advise RC"
 *     advise2:ADVICE:D     cuMemAdvise_v2 of the whole range                    "advise2 RC"
 *     alloc:BYTES          cuMemAlloc_v2, kept                                  "more RC" */
#include "cudrv.h"

#define MANAGED_GLOBAL 1 /* CU_MEM_ATTACH_GLOBAL */
#define DEVICE_CPU (-1)  /* CU_DEVICE_CPU */
#define ON_HOST 2        /* CU_MEM_LOCATION_TYPE_HOST */

CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemPrefetchAsync(CUdeviceptr, size_t, CUdevice, CUstream);
CUresult cuMemPrefetchAsync_v2(CUdeviceptr, size_t, Location, unsigned, CUstream);
CUresult cuMemAdvise(CUdeviceptr, size_t, int, CUdevice); /* CUmem_advise is an enum */
CUresult cuMemAdvise_v2(CUdeviceptr, size_t, int, Location);

typedef CUresult (*prefetch2_fn)(CUdeviceptr, size_t, Location, unsigned, CUstream);

static Location where(int d)
{
    Location loc = {d == DEVICE_CPU ? ON_HOST : ON_DEVICE, d == DEVICE_CPU ? 0 : d};
    return loc;
}

static CUresult through_proc(CUdeviceptr p, size_t bytes, int d)
{
    void *fn = NULL;
    CUresult rc = cuGetProcAddress("cuMemPrefetchAsync", &fn, 12020, 0);
    return rc ? rc : ((prefetch2_fn)fn)(p, bytes, where(d), 0, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: managed DEV BYTES STEP...\n");
        return 2;
    }
    CUdeviceptr p = 0, more = 0;
    size_t bytes = (size_t)strtoull(argv[2], NULL, 10);
    check(cuInit(0), "cuInit");
    use_device(atoi(argv[1]));
    CUresult rc = cuMemAllocManaged(&p, bytes, MANAGED_GLOBAL);
    printf("alloc %d\n", rc);
    for (int i = 3; i < argc && rc == 0; i++) {
        int d = 0, advice = 0;
        unsigned long long value = 0;
        const char *step = argv[i];
        if (sscanf(step, "prefetch:%d", &d) == 1)
            printf("prefetch %d\n", cuMemPrefetchAsync(p, bytes, d, NULL));
        else if (sscanf(step, "prefetch2:%d", &d) == 1)
            printf("prefetch2 %d\n", cuMemPrefetchAsync_v2(p, bytes, where(d), 0, NULL));
        else if (sscanf(step, "proc:%d", &d) == 1)
            printf("proc %d\n", through_proc(p, bytes, d));
        else if (sscanf(step, "advise:%d:%d", &advice, &d) == 2)
            printf("advise %d\n", cuMemAdvise(p, bytes, advice, d));
        else if (sscanf(step, "advise2:%d:%d", &advice, &d) == 2)
            printf("advise2 %d\n", cuMemAdvise_v2(p, bytes, advice, where(d)));
        else if (sscanf(step, "alloc:%llu", &value) == 1)
            printf("more %d\n", cuMemAlloc_v2(&more, (size_t)value));
        else {
            fprintf(stderr, "managed: unknown step %s\n", step);
            return 2;
        }
        fflush(stdout);
    }
    return 0;
}
