/* The real driver and NVML behind the hooks. The libraries are opened by their sonames the first
 * time a hook needs them (a process that never touches CUDA never loads the driver), and every
 * lookup goes through glibc's dlsym directly so it cannot recurse into our own dlsym. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "hooks.h"

#define VGPU_NAME(name) #name,
static const char *const cuda_names[] = {VGPU_CUDA_HOOKS(VGPU_NAME) VGPU_CUDA_USED(VGPU_NAME)};
static const char *const nvml_names[] = {VGPU_NVML_HOOKS(VGPU_NAME) VGPU_NVML_USED(VGPU_NAME)};


static void *cuda_real[VGPU_CUDA_COUNT];
static void *nvml_real[VGPU_NVML_COUNT];
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

/* glibc versions its dl functions: 2.34 on current x86-64, 2.2.5 and 2.17 on older/aarch64. */
VGPU_NO_ASAN static void *glibc(const char *name)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    void *fn = NULL;
    for (size_t i = 0; !fn && i < sizeof versions / sizeof versions[0]; i++)
        fn = dlvsym(RTLD_NEXT, name, versions[i]);
    return fn;
}

VGPU_NO_ASAN vgpu_dlsym_fn vgpu_glibc_dlsym(void)
{
    static vgpu_dlsym_fn real;
    vgpu_dlsym_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = (vgpu_dlsym_fn)glibc("dlsym");
        __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

VGPU_NO_ASAN vgpu_dlopen_fn vgpu_glibc_dlopen(void)
{
    static vgpu_dlopen_fn real;
    vgpu_dlopen_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = (vgpu_dlopen_fn)glibc("dlopen");
        __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

VGPU_NO_ASAN void *vgpu_real_dlsym(void *handle, const char *name)
{
    vgpu_dlsym_fn fn = vgpu_glibc_dlsym();
    return fn ? fn(handle, name) : NULL;
}

/* glibc's dlopen directly, not our exported one (lookup.c): the driver is opened without
 * RTLD_DEEPBIND anyway, and this file then calls nothing of the hooks' side. */
static void load(const char *soname, const char *const *names, void **table, int count)
{
    vgpu_dlopen_fn open_library = vgpu_glibc_dlopen();
    void *lib = open_library ? open_library(soname, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!lib)
        return;
    for (int i = 0; i < count; i++)
        table[i] = vgpu_real_dlsym(lib, names[i]);
}

static void load_cuda(void)
{
    load("libcuda.so.1", cuda_names, cuda_real, VGPU_CUDA_COUNT);
}

static void load_nvml(void)
{
    load("libnvidia-ml.so.1", nvml_names, nvml_real, VGPU_NVML_COUNT);
}

void *vgpu_real_cuda(int index)
{
    pthread_once(&cuda_once, load_cuda);
    return cuda_real[index];
}

void *vgpu_real_nvml(int index)
{
    pthread_once(&nvml_once, load_nvml);
    return nvml_real[index];
}
