/* CUDA arrays and mipmapped arrays, counted from their descriptor (virtual memory management is
 * in vmm.c). */
#include <stdint.h>

#include "account.h"
#include "allocs.h"
#include "hooks.h"
#include "state.h"

typedef CUresult (*array_fn)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
typedef CUresult (*array3d_fn)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
typedef CUresult (*mipmap_fn)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
typedef CUresult (*destroy_fn)(void *);

#define MISSING(fn) if (!(fn)) return CUDA_ERROR_NOT_INITIALIZED

/* Bytes per channel of a CUarray_format; formats not listed count 4 bytes per channel. */
static uint64_t channel_bytes(int format)
{
    switch (format) {
    case 0x01: case 0x08: return 1; /* (un)signed 8-bit */
    case 0x02: case 0x09: case 0x10: return 2; /* (un)signed 16-bit, half */
    default: return 4; /* 32-bit integers, float, and anything newer */
    }
}

static uint64_t at_least_one(size_t n)
{
    return n ? (uint64_t)n : 1;
}

/* Bytes of a width x height x depth array; UINT64_MAX on overflow (which then never fits). */
static uint64_t array_bytes(size_t w, size_t h, size_t d, int format, unsigned channels)
{
    uint64_t bytes = channel_bytes(format);
    if (__builtin_mul_overflow(bytes, (uint64_t)channels, &bytes) ||
        __builtin_mul_overflow(bytes, at_least_one(w), &bytes) ||
        __builtin_mul_overflow(bytes, at_least_one(h), &bytes) ||
        __builtin_mul_overflow(bytes, at_least_one(d), &bytes))
        return UINT64_MAX;
    return bytes;
}

static CUresult begin(uint64_t bytes, int *index)
{
    CUresult rc = vgpu_current_index(index);
    return rc != CUDA_SUCCESS ? rc : vgpu_reserve(*index, bytes);
}

VGPU_EXPORT CUresult cuArrayCreate_v2(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    array_fn real = REAL_CU(array_fn, cuArrayCreate_v2);
    int index;
    MISSING(real);
    if (!desc)
        return real(array, desc);
    uint64_t bytes = array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
    CUresult rc = begin(bytes, &index);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(array, desc);
    return vgpu_settle(rc, VGPU_KIND_ARRAY, rc ? 0 : (uint64_t)(uintptr_t)*array, index, bytes);
}

VGPU_EXPORT CUresult cuArray3DCreate_v2(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    array3d_fn real = REAL_CU(array3d_fn, cuArray3DCreate_v2);
    int index;
    MISSING(real);
    if (!desc)
        return real(array, desc);
    uint64_t bytes =
        array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
    CUresult rc = begin(bytes, &index);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(array, desc);
    return vgpu_settle(rc, VGPU_KIND_ARRAY, rc ? 0 : (uint64_t)(uintptr_t)*array, index, bytes);
}

/* Every level halves each dimension (never below 1). */
static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    uint64_t total = 0;
    size_t w = d->Width, h = d->Height, z = d->Depth;
    for (unsigned i = 0; i < levels; i++) {
        uint64_t level = array_bytes(w, h, z, d->Format, d->NumChannels);
        if (__builtin_add_overflow(total, level, &total))
            return UINT64_MAX;
        w = w > 1 ? w / 2 : w;
        h = h > 1 ? h / 2 : h;
        z = z > 1 ? z / 2 : z;
    }
    return total;
}

VGPU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *array,
                                            const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned levels)
{
    mipmap_fn real = REAL_CU(mipmap_fn, cuMipmappedArrayCreate);
    int index;
    MISSING(real);
    if (!desc)
        return real(array, desc, levels);
    uint64_t bytes = mipmap_bytes(desc, levels);
    CUresult rc = begin(bytes, &index);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(array, desc, levels);
    return vgpu_settle(rc, VGPU_KIND_MIPMAP, rc ? 0 : (uint64_t)(uintptr_t)*array, index, bytes);
}

static CUresult destroy(destroy_fn real, int kind, void *handle)
{
    int index = 0;
    uint64_t bytes = 0;
    MISSING(real);
    if (!vgpu_state_get())
        return CUDA_ERROR_NOT_PERMITTED;
    uint64_t key = (uint64_t)(uintptr_t)handle;
    int found = vgpu_forget(kind, key, &index, &bytes);
    return vgpu_freed(real(handle), found, kind, key, index, bytes);
}

VGPU_EXPORT CUresult cuArrayDestroy(CUarray array)
{
    return destroy(REAL_CU(destroy_fn, cuArrayDestroy), VGPU_KIND_ARRAY, array);
}

VGPU_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array)
{
    return destroy(REAL_CU(destroy_fn, cuMipmappedArrayDestroy), VGPU_KIND_MIPMAP, array);
}
