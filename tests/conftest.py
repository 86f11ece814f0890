"""Suite-wide set-up.

`vgpu.adapters` is imported first so the kubernetes client packages' `__init__` bodies are
deferred (`vgpu.adapters.kube.client_import`) in the whole test process, as in the daemons: tests
that import `kubernetes` directly (the fake API server's own tests) then run on the deferred
package. The fake API server's fixtures come from the conftests of the folders that use them, so the
core's and the simulator's tests also run on a plain `pip install .` (CI does).
"""

import vgpu.adapters  # noqa: F401
