"""Suite-wide set-up.

`vgpu.adapters` is imported before anything that imports kubernetes, so the client packages'
`__init__` bodies are deferred (`vgpu.adapters.kube.client_import`) in the whole test process, as
in the daemons: tests that import `kubernetes` directly (the fake API server's own tests) then
run on the deferred package. The fake API server's fixtures come from the conftests of the
folders that use them, so the core's and the simulator's tests also run on a plain
`pip install .` (CI does).
"""

import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from xdist.scheduler import LoadScopeScheduling

import vgpu.adapters  # noqa: F401

REALK8S = "tests/realk8s/"

# No per-example deadline: an example's time says nothing here (the machine's load does: a
# chart-rendering property failed on a busy 2-core machine at hypothesis' 200 ms), and every
# test that bounds time asserts it itself. Tests' own @settings inherit this.
settings.register_profile("vgpu", deadline=None)
settings.load_profile("vgpu")


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


def cpus_allowed(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The CPUs this process may use: its affinity, within a cgroup v2 CPU quota (`cpu.max`,
    "QUOTA PERIOD" or "max PERIOD"), which a container may set without narrowing its affinity."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = cpu_max.read_text().split()
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cpus


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker per CPU the suite may use (cpus_allowed), not per CPU the machine
    has: more workers than CPUs would slow every timing-sensitive test down. xdist's own
    answer where PYTEST_XDIST_AUTO_NUM_WORKERS names a number."""
    return None if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") else cpus_allowed()
