"""The real components with vgpu's shipped configuration: the scheduler configurations pass
kube-scheduler's own validation. (Restarts are in test_restarts.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.realk8s import configs
from tests.realk8s.cluster import DAEMONSET, RealCluster

pytestmark = pytest.mark.realk8s

SHIPPED = sorted((DAEMONSET / "scheduler").glob("*config*.yaml"))


@pytest.mark.parametrize("shipped", SHIPPED, ids=lambda p: p.name)
def test_shipped_scheduler_config_passes_kube_scheduler_validation(
    real_cluster: RealCluster, shipped: Path, tmp_path: Path
) -> None:
    """kube-scheduler --write-config-to loads, defaults and validates the configuration, builds
    the profiles and extenders, writes the result and exits (cmd/kube-scheduler/app/server.go)."""
    config = configs.scheduler_config(
        shipped,
        real_cluster.kubeconfig("vgpu-scheduler"),
        "127.0.0.1:1/scheduler",
        real_cluster.pki,
    )
    path, out = tmp_path / "config.yaml", tmp_path / "effective.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [
            str(real_cluster.binary),
            "kube-scheduler",
            f"--config={path}",
            f"--write-config-to={out}",
            "--secure-port=0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    effective = yaml.safe_load(out.read_text())
    assert effective["profiles"][0]["schedulerName"] == "vgpu-scheduler"
    assert effective["extenders"][0]["bindVerb"] == "bind"
