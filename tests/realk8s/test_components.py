"""The real components with vgpu's shipped configuration: the scheduler configurations validate,
and the device plugins come back after a kubelet restart."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.realk8s import configs, pods
from tests.realk8s.cluster import DAEMONSET, RealCluster
from tests.realk8s.processes import wait_until

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


def _fresh_sockets(directory: Path, since: float) -> set[str]:
    """Names of the sockets in `directory` created after `since` (wall-clock seconds)."""
    return {p.name for p in directory.iterdir() if p.is_socket() and p.stat().st_ctime > since}


def test_kubelet_restart_plugins_register_again(real_cluster: RealCluster) -> None:
    """The restarted kubelet deletes the device-plugin directory's sockets and makes a new
    kubelet.sock; the agent notices and registers both resources again."""
    pods.delete_all(real_cluster.admin)
    node = "node-a"
    plugins = real_cluster.node_dir(node) / "kubelet" / "device-plugins"
    real_cluster.procs.stop(f"kubelet-{node}")
    since, started = time.time(), time.monotonic()
    real_cluster.start_kubelet(node)

    def registered() -> bool:
        fresh = _fresh_sockets(plugins, since)
        return "kubelet.sock" in fresh and len(fresh) >= 3  # kubelet.sock, cores, memory

    wait_until(registered, 60, "a new kubelet.sock and both plugin sockets made again")
    registered_s = time.monotonic() - started
    real_cluster.wait_node_gpus(node)
    # A pod without vGPUs runs first: the kubelet frees the devices of the pods deleted above
    # only once its pod source has delivered a first update (docs/handshake.md, "Devices the
    # kubelet still counts after its restart"), and this test is about registering again.
    canary = pods.pod("canary", pods.container("main"))
    canary["spec"]["nodeName"] = node
    real_cluster.admin.post(pods.PODS, canary)
    pods.wait_running(real_cluster.admin, "canary", timeout=90)
    real_cluster.admin.post(pods.PODS, pods.pod("after-restart", pods.container("main", 100)))
    pods.wait_running(real_cluster.admin, "after-restart", timeout=90)
    print(
        f"kubelet restart: plugins registered again after {registered_s:.1f}s; capacity back "
        f"and a pod admitted after {time.monotonic() - started:.1f}s"
    )
    pods.delete_all(real_cluster.admin)
