"""vgpu's queues on the real cluster: the chart's queue objects, the ConfigMap, queued pods, and
what the cluster holds per queue.

The queue admission policies ship in the chart only (`queues.enabled`), not in daemonset/, so
they are rendered here with helm and created as rendered; the extender then runs with
`--queues-config` naming the rendered ConfigMap.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.realk8s import binary, manifests, pods
from tests.realk8s.cluster import SYSTEM, RealCluster
from tests.realk8s.processes import free_port, wait_until
from tests.realk8s.rest import ApiError, Obj, Rest
from vgpu.api.queues.config import QUEUE_GATE, QUEUE_LABEL

CONFIG_MAP = f"/api/v1/namespaces/{SYSTEM}/configmaps/vgpu-queues"
QUEUES_FLAG = f"--queues-config={SYSTEM}/vgpu-queues"


def queue_flags() -> tuple[str, str]:
    """The extender's flags here: the queue ConfigMap, and a probe port of its own (replicas
    share the host; the default 8081 may be taken)."""
    return QUEUES_FLAG, f"--probe-port={free_port()}"


PDBS = f"/apis/policy/v1/namespaces/{pods.NS}/poddisruptionbudgets"
NAMESPACES = {"qa": pods.NS, "qb": "qb", "qc": "qc"}
"""Each test queue's namespace, as the operator binds them (a namespace serves one
queue): qa the test namespace, qb and qc each one of its own."""


def path(queue: str) -> str:
    """Where a queue's pods are created."""
    return f"/api/v1/namespaces/{NAMESPACES[queue]}/pods"


def post(admin: Rest, name: str, queue: str, cores: int, **labels: str) -> Obj:
    """Create a pod of `queue` in the queue's namespace."""
    return admin.post(path(queue), qpod(name, queue, cores, **labels))


def delete_all(admin: Rest) -> None:
    """Delete the pods of every test queue's namespace."""
    for namespace in sorted(set(NAMESPACES.values())):
        pods.delete_all(admin, namespace)


def rendered() -> list[Obj]:
    """The chart's queue objects for this cluster's namespace (queues qa, qb and qc, weights
    1:3:1; each test configures its own weights)."""
    import chart  # hack/chart.py, on sys.path through tests.deploy.test_chart

    listed = [
        {"name": "qa", "namespaces": [NAMESPACES["qa"]]},
        {"name": "qb", "weight": 3, "namespaces": [NAMESPACES["qb"]]},
        {"name": "qc", "namespaces": [NAMESPACES["qc"]]},
    ]
    values = {"queues": {"enabled": True, "list": listed}}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(values, f)
        f.flush()
        out = chart.run_helm(
            "template", "vgpu", str(chart.CHART), "-n", SYSTEM, "--kube-version", binary.kube_version(),
            "-f", f.name, "--show-only", "templates/queues.yaml",
        )  # fmt: skip
    return [d for d in yaml.safe_load_all(out) if d]


def install(cluster: RealCluster) -> list[Obj]:
    """Create qb's and qc's namespaces (kept afterwards: no namespace controller runs here to
    finalize their deletion) and the queue objects, and wait until the gate policy acts on new
    pods."""
    for ns in ("qb", "qc"):
        manifests.create(
            cluster.admin, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
        manifests.create(  # no kube-controller-manager runs: the account it would create
            cluster.admin,
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": ns},
                "automountServiceAccountToken": False,
            },
        )
    objs = [manifests.create(cluster.admin, obj) for obj in rendered()]
    wait_until(lambda: _probe_gated(cluster.admin), 60, "the queue gate policy to act")
    return objs


def _probe_gated(admin: Rest) -> bool:
    """Whether a new vGPU pod of the test namespace comes out of admission gated."""
    created = admin.post(pods.PODS, qpod("queue-probe", "qa", 10))
    admin.delete(f"{pods.PODS}/queue-probe")
    wait_until(lambda: _gone(admin, "queue-probe"), 30, "the probe to go")
    return QUEUE_GATE in gates(created)


def uninstall(cluster: RealCluster, objs: list[Obj]) -> None:
    """Delete the queue objects and wait until the API server stops gating new pods: it
    reloads admission policies from its own informer, so a pod created just after the delete
    can still be gated, and with no queue pass left to release it, it would never be bound."""
    for obj in reversed(objs):
        try:
            cluster.admin.delete(manifests.object_path(obj))
        except ApiError as err:
            if err.status != 404:
                raise
    wait_until(lambda: not _probe_gated(cluster.admin), 60, "the queue gate policy to stop")


def configure(admin: Rest, queues: list[Obj], **top: Any) -> None:
    """Replace the queues (the extender reads them on its next pass)."""
    text = json.dumps({"queues": queues, **top})
    admin.merge_patch(CONFIG_MAP, {"data": {"queues.json": text}})


def qpod(name: str, queue: str, cores: int, **labels: str) -> Obj:
    """A pod of `queue`, in the queue's namespace."""
    pod = pods.pod(name, pods.container("main", cores), labels={QUEUE_LABEL: queue, **labels})
    pod["metadata"]["namespace"] = NAMESPACES[queue]
    return pod


def gates(pod: Obj) -> list[str]:
    return [str(g.get("name")) for g in pod.get("spec", {}).get("schedulingGates") or []]


def _gone(admin: Rest, name: str) -> bool:
    try:
        pods.get(admin, name)
    except ApiError as err:
        return err.status == 404
    return False


@dataclass
class Holding:
    """The test queues' namespaces' pods as listed, per queue (`-` for none)."""

    bound: dict[str, int] = field(default_factory=dict)
    """Cores of pods bound to a node and not being deleted."""
    gated: dict[str, int] = field(default_factory=dict)
    released: int = 0
    """Pods neither gated nor bound (released, not yet scheduled)."""
    deleting: int = 0
    items: list[Obj] = field(default_factory=list)

    def share(self, queue: str) -> float:
        total = sum(self.bound.values())
        return self.bound.get(queue, 0) / total if total else 0.0


def holding(admin: Rest) -> Holding:
    items = [i for q in sorted(NAMESPACES) for i in admin.get(path(q)).get("items", [])]
    out = Holding(items=items)
    for pod in out.items:
        queue = (pod["metadata"].get("labels") or {}).get(QUEUE_LABEL, "-")
        limits = pod["spec"]["containers"][0]["resources"].get("limits") or {}
        cores = int(limits.get("vgpu.io/cores", 0))
        if pod["metadata"].get("deletionTimestamp"):
            out.deleting += 1
        elif gates(pod):
            out.gated[queue] = out.gated.get(queue, 0) + cores
        elif pod["spec"].get("nodeName"):
            out.bound[queue] = out.bound.get(queue, 0) + cores
        else:
            out.released += 1
    return out


def protect(admin: Rest, name: str, selector: dict[str, str]) -> None:
    """A PodDisruptionBudget allowing no disruption of the pods `selector` picks. No
    kube-controller-manager runs here, so the test writes its status as the disruption
    controller would (observedGeneration current, disruptionsAllowed 0)."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": pods.NS},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": selector}},
    }
    created = admin.post(PDBS, pdb)
    created["status"] = {
        "observedGeneration": created["metadata"]["generation"],
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    }
    admin.put(f"{PDBS}/{name}/status", created)


def unprotect_all(admin: Rest) -> None:
    for pdb in admin.get(PDBS).get("items", []):
        admin.delete(f"{PDBS}/{pdb['metadata']['name']}")


def released_lines(log: Path) -> list[tuple[str, str]]:
    """(time, pod key) of each release an extender logged."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if "released pod " in line:
            out.append((line[:23], line.split("released pod ", 1)[1].split()[0]))
    return out
