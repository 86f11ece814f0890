/* Symbol lookup: a program that reaches the driver through dlopen + dlsym (as the CUDA runtime
 * and ctypes do) gets our hooks, not the driver's functions. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "hooks.h"

/* Declared only to take their addresses; the definitions carry the real prototypes. */
#define VGPU_DECLARE(name) extern void name(void);
VGPU_CUDA_HOOKS(VGPU_DECLARE)
VGPU_NVML_HOOKS(VGPU_DECLARE)

typedef struct {
    const char *name;
    void (*hook)(void);
    int nvml;
    int index;
} hook_entry;

#define VGPU_CUDA_ENTRY(name) {#name, name, 0, VGPU_##name},
#define VGPU_NVML_ENTRY(name) {#name, name, 1, VGPU_##name},
static const hook_entry table[] = {VGPU_CUDA_HOOKS(VGPU_CUDA_ENTRY) VGPU_NVML_HOOKS(VGPU_NVML_ENTRY)};
#define TABLE_SIZE (sizeof table / sizeof table[0])

/* No libc string functions here: dlsym runs inside the AddressSanitizer runtime's start-up, whose
 * interceptors of strcmp and friends are not ready yet. */
VGPU_NO_ASAN static int same(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

VGPU_NO_ASAN void *vgpu_hook_for_name(const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u') {
        if (!name || name[0] != 'n' || name[1] != 'v' || name[2] != 'm' || name[3] != 'l')
            return NULL;
    }
    for (size_t i = 0; i < TABLE_SIZE; i++)
        if (same(table[i].name, name))
            return (void *)table[i].hook;
    return NULL;
}

void *vgpu_hook_for_real(void *real)
{
    for (size_t i = 0; real && i < TABLE_SIZE; i++) {
        if (table[i].nvml)
            continue;
        if (vgpu_real_cuda(table[i].index) == real)
            return (void *)table[i].hook;
    }
    return real;
}

/* A name we do not hook goes to glibc by a tail call, so glibc sees the caller's return address
 * and answers RTLD_NEXT for the caller, not for this library. A hooked name answers our hook
 * whenever the real lookup finds the driver's function (by any handle, RTLD_NEXT included). */
VGPU_EXPORT VGPU_NO_ASAN void *dlsym(void *handle, const char *name)
{
    void *hook = vgpu_hook_for_name(name);
    if (!hook)
        return vgpu_glibc_dlsym()(handle, name);
    return vgpu_glibc_dlsym()(handle, name) ? hook : NULL;
}

/* RTLD_DEEPBIND makes the opened library look up symbols in itself and its own dependencies
 * before the global scope, so a library linked against libcuda.so.1 would reach the driver's
 * functions and never our hooks (preloaded, hence global). The flag is dropped: the library
 * binds like any other, hooks first. glibc is reached by a tail call so it still sees the
 * caller (whose namespace and search path dlopen uses). A library that relied on DEEPBIND to
 * prefer its own copy of a symbol also defined globally binds to the global one instead. */
VGPU_EXPORT VGPU_NO_ASAN void *dlopen(const char *file, int flags)
{
    vgpu_dlopen_fn real = vgpu_glibc_dlopen();
    return real ? real(file, flags & ~RTLD_DEEPBIND) : NULL;
}
