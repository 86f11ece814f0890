/* A library linked against libcuda.so.1 that allocates device memory: memload opens it with
 * RTLD_DEEPBIND, which makes its own dependencies (the driver) win over preloaded libraries. */
typedef unsigned long long CUdeviceptr;
int cuMemAlloc_v2(CUdeviceptr *, unsigned long);

__attribute__((visibility("default"))) int memlib_alloc(unsigned long bytes)
{
    CUdeviceptr p;
    return cuMemAlloc_v2(&p, bytes);
}
