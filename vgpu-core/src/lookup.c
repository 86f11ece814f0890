/* Symbol lookup: a program that reaches the driver through dlopen + dlsym (as the CUDA runtime
 * and ctypes do) gets our hooks, not the driver's functions. RTLD_NEXT lookups of other names are
 * answered as glibc would answer them for the caller, not for this library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

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

void *vgpu_hook_for_name(const char *name)
{
    if (!name || (strncmp(name, "cu", 2) != 0 && strncmp(name, "nvml", 4) != 0))
        return NULL;
    for (size_t i = 0; i < TABLE_SIZE; i++)
        if (strcmp(table[i].name, name) == 0)
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

/* RTLD_NEXT relative to the caller: search the objects loaded after the caller's, in order. */
static void *lookup_next(const void *caller, const char *name)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
        return vgpu_real_dlsym(RTLD_NEXT, name);
    for (struct link_map *l = map->l_next; l; l = l->l_next) {
        void *handle = dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
        if (!handle)
            continue;
        void *sym = vgpu_real_dlsym(handle, name);
        dlclose(handle);
        if (sym)
            return sym;
    }
    return NULL;
}

VGPU_EXPORT void *dlsym(void *handle, const char *name)
{
    void *real = handle == RTLD_NEXT ? lookup_next(__builtin_return_address(0), name)
                                     : vgpu_real_dlsym(handle, name);
    void *hook = real ? vgpu_hook_for_name(name) : NULL;
    return hook ? hook : real;
}
