"""Suite-wide set-up.

`vgpu.adapters` is imported before anything that imports kubernetes, so the client packages'
`__init__` bodies are deferred (`vgpu.adapters.kube.client_import`) in the whole test process, as
in the daemons: tests
that import `kubernetes` directly (the fake API server's own tests) then run on the deferred
package. The fake API server's fixtures come from the conftests of the folders that use them, so the
core's and the simulator's tests also run on a plain `pip install .` (CI does).
"""

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

import vgpu.adapters  # noqa: F401

REALK8S = "tests/realk8s/"


class Groups(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
    """pytest-xdist's scopes for this suite (pyproject's `-n auto --dist loadscope`).

    The real-cluster tier shares one cluster per process, started by its first test: its tests
    are one scope, so one worker runs them all, and first (xdist orders scopes by size, and it is
    the largest), since its minutes are mostly spent waiting on the cluster while the other
    workers fill the cores. Every other file is a scope of its own, so a module's fixtures are
    made once. (xdist's `xdist_group` mark would say the same, but it renames node IDs in a way
    pytest 9.2 no longer honours.)"""

    def _split_scope(self, nodeid: str) -> str:
        return REALK8S if nodeid.startswith(REALK8S) else nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    """The suite's scheduler for `--dist loadscope` (Groups); xdist's own for any other mode."""
    return Groups(config, log) if config.getvalue("dist") == "loadscope" else None
