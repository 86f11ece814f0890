"""The suite's pytest-xdist scopes (tests/conftest.py): the real-cluster tier runs whole on one
worker, since each worker that ran one of its tests would start a cluster of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/realk8s/test_admission.py", "tests/realk8s/test_tenant.py", "tests/test_waiting.py"]


def test_the_real_cluster_tier_runs_on_one_worker_and_other_files_spread() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "VGPU_REALK8S")}  # tier skips
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", *FILES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    workers: dict[str, set[str]] = {}
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] .*? (tests/\S+)", run.stdout, re.M):
        scope = "realk8s" if nodeid.startswith("tests/realk8s/") else nodeid.split("::")[0]
        workers.setdefault(scope, set()).add(worker)
    assert set(workers) == {"realk8s", "tests/test_waiting.py"}, run.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), workers


def test_auto_workers_follow_a_cgroup_cpu_quota(tmp_path: Path) -> None:
    from tests.conftest import cpus_allowed

    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs: two workers, if the affinity has two
    assert cpus_allowed(cpu_max) == min(2, len(os.sched_getaffinity(0)))
    cpu_max.write_text("max 100000\n")
    assert cpus_allowed(cpu_max) == len(os.sched_getaffinity(0))
    assert cpus_allowed(tmp_path / "absent") == len(os.sched_getaffinity(0))
