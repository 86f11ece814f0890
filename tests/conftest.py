"""Suite-wide set-up.

`vgpu.adapters` is imported first so the kubernetes client packages' `__init__` bodies are
deferred (`vgpu.adapters.kubeimport`) in the whole test process, as in the daemons: tests that
import `kubernetes` directly (the fake API server's own tests) then run on the deferred package.
"""

import vgpu.adapters  # noqa: F401
