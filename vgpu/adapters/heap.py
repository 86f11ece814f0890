"""Hand the C heap's free pages back to the OS once a daemon has settled after start-up.

Start-up (imports, kubeconfig parsing, the first listings and their JSON) frees a few MiB that
glibc's allocator keeps mapped: the main heap can only shrink from its top, so one live block above
freed ones pins them all. `malloc_trim(0)` releases such free pages anywhere in the heap. For the
node agent that is ~2 MiB of its 60 MiB resident budget, at no cost afterwards, so it trims once,
when first ready. Set by the process itself, no environment needed; a no-op (False) where the C
library has no `malloc_trim` (musl, macOS).
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)


def release_free_heap() -> bool:
    """Return free C-heap pages to the OS (glibc `malloc_trim(0)`); True if any were released."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    released = bool(trim(0))
    log.debug("malloc_trim: %s", "released memory" if released else "nothing to release")
    return released
