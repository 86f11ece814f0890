/* What a forked child forgets: the parent's slot in the shared region, its allocations and its
 * pending launch measurements are not the child's. The handler is registered once, when the
 * library is loaded, here above the modules it resets, so none of them (the state loader
 * included) needs to know the ones above it; each reset is harmless in a process that never
 * loaded its grant. */
#include <pthread.h>

#include "allocs.h"
#include "ctxlimits.h"
#include "graphmem.h"
#include "launch.h"
#include "pools.h"
#include "region.h"

static void after_fork_in_child(void)
{
    vgpu_region_forget_self();
    vgpu_allocs_forget();
    vgpu_vmm_forget();
    vgpu_ipc_forget();
    vgpu_pools_forget();
    vgpu_graphmem_forget();
    vgpu_launch_forget();
    vgpu_ctxlimits_forget();
}

__attribute__((constructor)) static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
}
