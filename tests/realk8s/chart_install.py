"""The test cluster set up by the Helm chart as shipped (`hack/testcluster.sh up DIR --chart`).

Without it the cluster creates vgpu's namespace, RBAC and admission policy from daemonset/ by
POST, objects Helm does not own, so the documented `helm install --dry-run=server` and a real
install or upgrade failed there (Helm refuses to adopt them). With it, `helm install` itself
creates every object of the chart, with queues on (two queues, team-a and team-b, bound to
their namespaces); the daemons then run as processes with those objects' accounts, the
extender with `--queues-config` and the agents with their metrics ports open. Deployments and
DaemonSets are stored but run nothing (no controller-manager runs): the processes stand in.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.realk8s.processes import free_port

REPO = Path(__file__).resolve().parents[2]
RELEASE = "vgpu"
NAMESPACE = "vgpu-system"
QUEUE_CONFIG = f"{NAMESPACE}/vgpu-queues"
QUEUES = ("team-a", "team-b")
VALUES = (
    "queues.enabled=true",
    "queues.list[0].name=team-a",
    "queues.list[0].weight=1",
    "queues.list[0].namespaces[0]=team-a",
    "queues.list[1].name=team-b",
    "queues.list[1].weight=3",
    "queues.list[1].namespaces[0]=team-b",
    "queues.intervalSeconds=1",
)
"""The chart's values for the test cluster: its defaults, and queues on."""


def helm_binary() -> str:
    """hack/chart.py's helm (.bin/helm, $HELM or PATH); raises its ChartError without one."""
    if str(REPO / "hack") not in sys.path:
        sys.path.insert(0, str(REPO / "hack"))
    import chart

    return str(chart.helm())


def helm(kubeconfig: Path, *args: str) -> str:
    """Run helm against the cluster; RuntimeError with its output when it fails."""
    argv = [helm_binary(), f"--kubeconfig={kubeconfig}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"helm {args[0]} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def install(kubeconfig: Path) -> str:
    """Install the chart from this checkout, as docs/operations.md installs it (an upgrade
    when a cluster directory used before holds the release already)."""
    sets = [f"--set={v}" for v in VALUES]
    return helm(
        kubeconfig, "upgrade", "--install", RELEASE, str(REPO / "charts" / "vgpu"),
        f"--namespace={NAMESPACE}", "--create-namespace", *sets,
    )  # fmt: skip


def queue_namespaces() -> list[dict[str, object]]:
    """The queues' namespaces, each with the `default` service account a controller-manager
    would create (none runs here), so pods can be created there."""
    objs: list[dict[str, object]] = []
    for name in QUEUES:
        objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        objs.append({
            "apiVersion": "v1", "kind": "ServiceAccount", "automountServiceAccountToken": False,
            "metadata": {"name": "default", "namespace": name},
        })  # fmt: skip
    return objs


def agent_flags() -> tuple[str, ...]:
    """A node agent's flags in chart mode: its metrics on a port of its own (nodes share the
    host)."""
    return (f"--metrics-port={free_port()}",)


def extender_flags() -> tuple[str, ...]:
    return (f"--queues-config={QUEUE_CONFIG}",)
